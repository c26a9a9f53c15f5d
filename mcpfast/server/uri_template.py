"""Matching URIs against RFC 6570 templates (the subset resource templates use).

Supported expressions: ``{var}`` (simple: one path segment, percent-decoded), ``{+var}``
(reserved: may span ``/``), and ``{?a,b}`` (form-style query, optional). Other operators raise
``ValueError`` when the template is compiled.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

__all__ = ["UriTemplate", "is_template"]

_EXPR = re.compile(r"\{([^{}]*)\}")
_NAME = re.compile(r"^[A-Za-z0-9_.%]+$")


def is_template(uri: str) -> bool:
    """Whether ``uri`` contains template expressions."""
    return _EXPR.search(uri) is not None


class UriTemplate:
    """A compiled URI template.

    Attributes:
        template: the template text.
        variables: the variable names, in order.
    """

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query: list[str] = []
        pattern = ["^"]
        pos = 0
        for match in _EXPR.finditer(template):
            pattern.append(re.escape(template[pos : match.start()]))
            pos = match.end()
            expr = match.group(1)
            op = expr[:1] if expr[:1] in "+#./;?&=,!@|" else ""
            names = expr[len(op) :].split(",")
            if any(not _NAME.match(n) for n in names):
                raise ValueError(f"invalid template expression {{{expr}}} in {template!r}")
            if op == "":
                if len(names) != 1:
                    raise ValueError(f"only one variable per simple expression: {{{expr}}}")
                pattern.append(f"(?P<{_group(names[0])}>[^/?#]+)")
            elif op == "+":
                if len(names) != 1:
                    raise ValueError(f"only one variable per reserved expression: {{{expr}}}")
                pattern.append(f"(?P<{_group(names[0])}>[^?#]+)")
            elif op == "?":
                if pos != len(template):
                    raise ValueError("a {?...} expression must end the template")
                self._query = names
                pattern.append(r"(?:\?(?P<_query>[^#]*))?")
            else:
                raise ValueError(f"template operator {op!r} is not supported: {{{expr}}}")
            self.variables.extend(names)
        pattern.append(re.escape(template[pos:]))
        pattern.append("$")
        self._regex = re.compile("".join(pattern))

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it matches, else ``None`` (values percent-decoded)."""
        found = self._regex.match(uri)
        if found is None:
            return None
        out: dict[str, str] = {}
        for name in self.variables:
            if name in self._query:
                continue
            out[name] = unquote(found.group(_group(name)))
        query = found.groupdict().get("_query")
        if query:
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key in self._query:
                    out[key] = value
        return out

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"


def _group(name: str) -> str:
    return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)

"""A cookie jar per HTTP user, on the standard library's :mod:`http.cookiejar` (domain, path,
expiry, ``Secure``): what keeps a user on one replica behind a balancer that pins clients with
a cookie. The native engine keeps its own jar per user by the same rules (``cookie_store``)."""

from __future__ import annotations

import http.cookiejar
import urllib.request
from email.message import Message

__all__ = ["Jar"]


class _Reply:
    """What :meth:`http.cookiejar.CookieJar.extract_cookies` reads of a response."""

    def __init__(self, set_cookies: list[str]) -> None:
        self._message = Message()
        for value in set_cookies:
            self._message["Set-Cookie"] = value

    def info(self) -> Message:
        return self._message


class Jar:
    """The cookies of one user for one endpoint URL."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._jar = http.cookiejar.CookieJar()

    def __len__(self) -> int:
        return len(self._jar)

    def absorb(self, set_cookies: list[str]) -> None:
        """Store the ``Set-Cookie`` values of a reply (a malformed or refused one is ignored)."""
        if set_cookies:
            self._jar.extract_cookies(_Reply(set_cookies), urllib.request.Request(self.url))  # type: ignore[arg-type]

    def header(self) -> str | None:
        """The ``Cookie`` header value for the next request, or None."""
        if not len(self._jar):
            return None
        request = urllib.request.Request(self.url)
        self._jar.add_cookie_header(request)
        return request.get_header("Cookie")

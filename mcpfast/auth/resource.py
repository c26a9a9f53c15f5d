"""The resource server: token verification, challenges and RFC 9728 metadata."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import jwt
from jwt import PyJWKSet

__all__ = ["JwksSource", "Principal", "ResourceServer", "TokenSink"]

_DEFAULT_ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_CACHE_SIZE: Final = 4096


class TokenSink(Protocol):
    """What a resource server tells of the tokens it verified (the native server's lane,
    ``core.HttpLane``, which then admits them without verifying them again)."""

    def learn_token(self, authorization: bytes, subject: str, until: float) -> bool:
        """The token of the ``Authorization`` value ``authorization`` speaks for ``subject``
        until the Unix time ``until``."""
        ...

    def forget_token(self, authorization: bytes) -> None:
        """The token of ``authorization`` is refused now."""
        ...

    def forget_tokens(self) -> None:
        """Every token told so far may be refused now (the signing keys changed)."""
        ...


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a verified token speaks for."""

    subject: str
    scopes: frozenset[str]
    claims: dict[str, Any] = field(repr=False, compare=False)


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class JwksSource:
    """A JWKS from a file or an URL (https, or http on loopback), cached for ``ttl`` seconds.

    An unknown ``kid`` triggers one refetch, at most every ``min_refresh`` seconds. A refetch
    that finds other keys than before calls every ``on_change`` callback (tokens verified with
    the old keys must be verified again).
    """

    def __init__(self, location: str, *, ttl: float = 300.0, min_refresh: float = 10.0, timeout: float = 5.0) -> None:
        self.location = location
        self.ttl = ttl
        self.min_refresh = min_refresh
        self.timeout = timeout
        parts = urlsplit(location)
        self.is_url = parts.scheme in ("http", "https")
        if self.is_url and parts.scheme == "http" and not _is_loopback(parts.hostname):
            raise ValueError("a JWKS URL must be https (plain http only on loopback)")
        self._keys: PyJWKSet | None = None
        self._seen: str | None = None  # the key set last read, as canonical JSON
        self._fetched = 0.0
        self._lock = asyncio.Lock()
        self._changed: list[Callable[[], None]] = []
        if not self.is_url:
            self._keys = PyJWKSet.from_dict(json.loads(Path(location).read_text()))
            self._fetched = float("inf")

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever a refetch finds other keys than before."""
        self._changed.append(callback)

    def due(self) -> bool:
        """Whether the keys must be fetched (again) before they are trusted."""
        return self._keys is None or (self.is_url and time.monotonic() - self._fetched > self.ttl)

    def trusted_until(self) -> float:
        """The Unix time until which the keys held are trusted without a refetch."""
        if not self.is_url:
            return float("inf")
        return time.time() + (self._fetched + self.ttl - time.monotonic())

    async def refresh_if_due(self) -> None:
        """Fetch the keys again if they are ``due``."""
        if self.due():
            await self._refresh(time.monotonic())

    def _fetch(self) -> Any:
        request = urllib.request.Request(self.location, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=self.timeout) as response:  # scheme checked
            return json.loads(response.read(1 << 20))

    async def key(self, kid: str | None) -> Any:
        """The verification key for ``kid`` (the only key when ``kid`` is absent), or ``None``."""
        now = time.monotonic()
        if self._keys is None or (self.is_url and now - self._fetched > self.ttl):
            await self._refresh(now)
        found = self._find(kid)
        if found is None and self.is_url and now - self._fetched > self.min_refresh:
            await self._refresh(now)
            found = self._find(kid)
        return found

    async def _refresh(self, now: float) -> None:
        async with self._lock:
            if self._keys is not None and time.monotonic() - self._fetched < self.min_refresh:
                return
            try:
                data = await asyncio.to_thread(self._fetch)
                keys = PyJWKSet.from_dict(data)
                seen = json.dumps(data, sort_keys=True)
            except (OSError, ValueError, TypeError, AttributeError, jwt.PyJWKSetError):
                if self._keys is None:
                    return
            else:
                changed = self._seen is not None and seen != self._seen
                self._keys, self._seen = keys, seen
                if changed:
                    for callback in self._changed:
                        callback()
            self._fetched = now

    def _find(self, kid: str | None) -> Any:
        keys = self._keys
        if keys is None:
            return None
        if kid is None:
            return keys.keys[0].key if len(keys.keys) == 1 else None
        for item in keys.keys:
            if item.key_id == kid:
                return item.key
        return None


class ResourceServer:
    """Verifies bearer tokens for one MCP endpoint.

    Args:
        jwks: a JWKS file path or URL, or a ``JwksSource``.
        resource: this server's canonical resource URI (the required ``aud``), e.g.
            ``http://127.0.0.1:8000/mcp``.
        issuer: the required ``iss`` (``None``: not checked; set it in production).
        scopes: scopes every request needs.
        authorization_servers: issuer URLs listed in the metadata (default: ``[issuer]``).
        leeway: seconds of clock skew tolerated on ``exp``/``nbf``/``iat``.
        algorithms: accepted JWS algorithms (never ``none``, never HMAC).
    """

    def __init__(
        self,
        jwks: str | JwksSource,
        resource: str,
        *,
        issuer: str | None = None,
        scopes: Iterable[str] = (),
        authorization_servers: Iterable[str] = (),
        leeway: float = 30.0,
        algorithms: Iterable[str] = _DEFAULT_ALGORITHMS,
        jwks_ttl: float = 300.0,
    ) -> None:
        self.jwks = jwks if isinstance(jwks, JwksSource) else JwksSource(jwks, ttl=jwks_ttl)
        self.resource = resource.rstrip("/") if resource.count("/") > 2 else resource
        self.issuer = issuer
        self.scopes = tuple(dict.fromkeys(scopes))
        servers = list(authorization_servers) or ([issuer] if issuer else [])
        self.authorization_servers = servers
        self.leeway = leeway
        self.algorithms = [a for a in algorithms if not a.startswith("HS") and a.lower() != "none"]
        parts = urlsplit(self.resource)
        origin = f"{parts.scheme}://{parts.netloc}"
        self.metadata_path = "/.well-known/oauth-protected-resource" + (parts.path.rstrip("/") or "")
        self.metadata_url = origin + self.metadata_path
        self._metadata = json.dumps(
            {
                "resource": self.resource,
                "authorization_servers": self.authorization_servers,
                "scopes_supported": list(self.scopes),
                "bearer_methods_supported": ["header"],
            }
        ).encode()
        self._cache: dict[str, tuple[Principal, float]] = {}
        self._sinks: list[TokenSink] = []
        self._challenge = self._www_authenticate()
        self.jwks.on_change(self._keys_changed)

    # ------------------------------------------------------------ metadata

    def _www_authenticate(self, error: str | None = None, description: str | None = None) -> bytes:
        parts = []
        if error is not None:
            parts.append(f'error="{error}"')
        parts.append(f'resource_metadata="{self.metadata_url}"')
        if self.scopes:
            parts.append(f'scope="{" ".join(self.scopes)}"')
        if description is not None:
            parts.append(f'error_description="{description}"')
        return ("Bearer " + ", ".join(parts)).encode()

    async def serve_metadata(self, path: str, scope: dict[str, Any], send: Any) -> None:
        """Answer ``GET /.well-known/oauth-protected-resource[/<path>]``."""
        if path not in ("/.well-known/oauth-protected-resource", self.metadata_path) or scope["method"] not in ("GET", "HEAD"):
            status, body = (405 if path == self.metadata_path else 404), b""
        else:
            status, body = 200, self._metadata
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 200:
            headers.append((b"cache-control", b"max-age=300"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope["method"] != "HEAD" else b""})

    # ----------------------------------------------------------- checking

    def lend(self, sink: TokenSink) -> None:
        """Tell ``sink`` of every token this server accepts from now on, until the earlier of
        its expiry and the time its keys must be fetched again; of every token it refuses; and
        when the keys change (every token then goes through ``check`` again)."""
        self._sinks.append(sink)

    def _keys_changed(self) -> None:
        """Tokens verified with the old keys are verified again (a key may have been revoked)."""
        self._cache.clear()
        for sink in self._sinks:
            sink.forget_tokens()

    def _refused(
        self, authorization: bytes, refusal: tuple[int, list[tuple[bytes, bytes]], bytes]
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        for sink in self._sinks:
            sink.forget_token(authorization)
        return refusal

    def _reject(self, status: int, error: str | None, description: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        challenge = self._www_authenticate(error, description) if error else self._challenge
        body = json.dumps({"error": error or "unauthorized", "error_description": description}).encode()
        return status, [(b"www-authenticate", challenge), (b"content-type", b"application/json")], body

    async def check(self, authorization: bytes | None) -> Principal | tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The principal of a valid token, or ``(status, headers, body)`` to answer with."""
        if authorization is None:
            return self._reject(401, None, "missing bearer token")
        scheme, _, token_bytes = authorization.partition(b" ")
        if scheme.lower() != b"bearer" or not token_bytes.strip():
            return self._reject(401, "invalid_request", "expected Authorization: Bearer <token>")
        token = token_bytes.strip().decode("ascii", "replace")
        await self.jwks.refresh_if_due()  # a cached token outlives no key set past its time
        now = time.time()
        cached = self._cache.get(token)
        if cached is None or cached[1] + self.leeway <= now:
            verified = await self._verify(token)
            if isinstance(verified, tuple):
                return self._refused(authorization, verified)
            cached = self._cache.get(token)
            principal = verified
        else:
            principal = cached[0]
        missing = [s for s in self.scopes if s not in principal.scopes]
        if missing:
            return self._refused(authorization, self._reject(403, "insufficient_scope", "the token lacks a required scope"))
        if cached is not None and self._sinks:
            until = min(cached[1], self.jwks.trusted_until())
            for sink in self._sinks:
                sink.learn_token(authorization, principal.subject, until)
        return principal

    async def _verify(self, token: str) -> Principal | tuple[int, list[tuple[bytes, bytes]], bytes]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return self._reject(401, "invalid_token", "malformed token")
        key = await self.jwks.key(header.get("kid"))
        if key is None:
            return self._reject(401, "invalid_token", "unknown signing key")
        options = {"require": ["exp", "aud", "sub"], "verify_iss": self.issuer is not None}
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.resource,
                issuer=self.issuer,
                leeway=self.leeway,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.ExpiredSignatureError:
            return self._reject(401, "invalid_token", "token expired")
        except jwt.InvalidAudienceError:
            return self._reject(401, "invalid_token", "token not issued for this resource")
        except jwt.InvalidIssuerError:
            return self._reject(401, "invalid_token", "untrusted issuer")
        except jwt.PyJWTError:
            return self._reject(401, "invalid_token", "invalid token")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return self._reject(401, "invalid_token", "token has no subject")
        raw_scope = claims.get("scope", claims.get("scp", ""))
        scopes = frozenset(raw_scope.split() if isinstance(raw_scope, str) else [s for s in raw_scope if isinstance(s, str)])
        principal = Principal(subject, scopes, claims)
        cache = self._cache
        if len(cache) >= _CACHE_SIZE:
            now = time.time()
            for stale in [t for t, (_, exp) in cache.items() if exp + self.leeway <= now] or list(cache)[: _CACHE_SIZE // 4]:
                cache.pop(stale, None)
        exp = claims.get("exp")
        if isinstance(exp, int | float):
            cache[token] = (principal, float(exp))
        return principal

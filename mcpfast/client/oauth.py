"""OAuth 2.1 client credentials for a swarm process (the MCP extension
``io.modelcontextprotocol/oauth-client-credentials``): one access token per process, shared by
its users, refreshed before it expires.

The steps are pure functions (what to fetch, how to read what came back, the token request to
send); :class:`TokenSource` runs them over HTTP. Discovery follows the MCP authorization rules:
the 401's ``WWW-Authenticate: Bearer resource_metadata=...`` (else the RFC 9728 well-known URIs,
path-inserted first) gives the protected-resource metadata and its ``resource``; its first
authorization server gives the RFC 8414 (or OpenID Discovery) metadata, whose ``issuer`` must be
the one asked for; the token endpoint gets ``grant_type=client_credentials`` with the RFC 8707
``resource``, the client authenticated by ``client_secret_basic``/``client_secret_post`` or by a
``private_key_jwt`` assertion (RFC 7523).

A token endpoint that refuses, a metadata document that does not match, an unreadable key: an
:class:`OAuthError` whose text names it.
"""

from __future__ import annotations

import base64
import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from mcpfast import core
from mcpfast.client.errors import McpClientError
from mcpfast.protocol.host import is_loopback

__all__ = [
    "ClientCredentials",
    "Discovery",
    "OAuthError",
    "Token",
    "TokenSource",
    "authorization_server_urls",
    "protected_resource_urls",
    "read_authorization_server",
    "read_protected_resource",
    "read_token",
    "refresh_delay",
    "token_request",
]

JWT_BEARER: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# A token is refreshed at this share of its lifetime (drawn per refresh, so that the processes
# of a distributed run do not all ask at once), and never later than this many seconds before
# it expires.
REFRESH_SHARE: Final = (0.70, 0.85)
REFRESH_MARGIN_S: Final = 2.0
_MAX_DOCUMENT: Final = 1 << 20
_ASSERTION_TTL_S: Final = 60


class OAuthError(McpClientError):
    """Discovery or a token request failed, or a request found no token; the text says which
    step and why."""

    category = "oauth"


@dataclass(frozen=True)
class ClientCredentials:
    """A pre-registered confidential client: a secret, or a private key for ``private_key_jwt``."""

    client_id: str
    client_secret: str | None = None
    private_key: str | None = None  # a PEM file
    scope: str | None = None

    def __post_init__(self) -> None:
        if not self.client_id:
            raise ValueError("--mcp-oauth-client-id is empty")
        if (self.client_secret is None) == (self.private_key is None):
            raise ValueError("--mcp-oauth-client-id needs one of --mcp-oauth-client-secret and --mcp-oauth-private-key")
        if self.private_key is not None:
            self.signing_key()  # an unreadable or unsupported key is refused here, before any load

    def signing_key(self) -> tuple[Any, str]:
        """The private key of ``private_key_jwt`` and its JWS algorithm."""
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        path = str(self.private_key)
        try:
            with open(path, "rb") as f:
                key = load_pem_private_key(f.read(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise ValueError(f"--mcp-oauth-private-key {path}: {exc}") from None
        if isinstance(key, rsa.RSAPrivateKey):
            return key, "RS256"
        if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
            return key, "ES256"
        if isinstance(key, ed25519.Ed25519PrivateKey):
            return key, "EdDSA"
        raise ValueError(f"--mcp-oauth-private-key {path}: an RSA, P-256 or Ed25519 key is needed")


@dataclass(frozen=True)
class Discovery:
    """Where tokens come from, and for what."""

    resource: str
    issuer: str
    token_endpoint: str
    auth_methods: tuple[str, ...]
    scope: str | None


@dataclass(frozen=True)
class Token:
    access_token: str
    expires_in: float | None


# -- the pure steps -------------------------------------------------------------------------------------
def _origin_and_path(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", "")), parts.path.rstrip("/")


def protected_resource_urls(url: str, www_authenticate: bytes | None) -> list[str]:
    """Where the protected-resource metadata may be, in the order to try: the challenge's
    ``resource_metadata``, then the path-inserted and the root well-known URIs (RFC 9728 §3.1)."""
    out = []
    named = core.auth_param(www_authenticate, "resource_metadata") if www_authenticate else None
    if named:
        out.append(named)
    origin, path = _origin_and_path(url)
    if path:
        out.append(f"{origin}/.well-known/oauth-protected-resource{path}")
    out.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(out))


def _canonical(uri: str) -> str:
    parts = urlsplit(uri)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


def read_protected_resource(body: bytes, url: str) -> tuple[str, str, tuple[str, ...]]:
    """``(resource, first authorization server, scopes_supported)`` from RFC 9728 metadata; the
    resource must be the MCP endpoint's URL or a prefix of it on the same origin."""
    doc = _document(body, "the protected-resource metadata")
    resource, servers = doc.get("resource"), doc.get("authorization_servers")
    if not isinstance(resource, str) or not resource:
        raise OAuthError("the protected-resource metadata has no resource")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers):
        raise OAuthError("the protected-resource metadata names no authorization server")
    mine, theirs = _canonical(url), _canonical(resource)
    if not (mine == theirs or mine.startswith(theirs + "/")):
        raise OAuthError(f"the protected-resource metadata is for {resource}, not for {url}")
    scopes = doc.get("scopes_supported")
    return resource, servers[0], tuple(s for s in scopes if isinstance(s, str)) if isinstance(scopes, list) else ()


def authorization_server_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the MCP probe order (RFC 8414, then OpenID Discovery)."""
    origin, path = _origin_and_path(issuer)
    if path:
        return [
            f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration",
        ]
    return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]


def read_authorization_server(body: bytes, issuer: str) -> tuple[str, tuple[str, ...]]:
    """``(token_endpoint, token_endpoint_auth_methods_supported)``; the document's ``issuer``
    must be the one its URL was built from (RFC 8414 §3.3)."""
    doc = _document(body, "the authorization server metadata")
    if doc.get("issuer") != issuer:
        raise OAuthError(f"the authorization server metadata is for issuer {doc.get('issuer')!r}, not {issuer!r}")
    endpoint = doc.get("token_endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise OAuthError(f"the authorization server {issuer} has no token_endpoint")
    grants = doc.get("grant_types_supported")
    if isinstance(grants, list) and "client_credentials" not in grants:
        raise OAuthError(f"the authorization server {issuer} does not offer the client_credentials grant")
    methods = doc.get("token_endpoint_auth_methods_supported")
    # RFC 8414 §2: absent means client_secret_basic only
    found = tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else ("client_secret_basic",)
    return endpoint, found


def token_request(creds: ClientCredentials, found: Discovery, now_unix: float) -> tuple[dict[str, str], bytes]:
    """The token endpoint request's headers and form body."""
    form = {"grant_type": "client_credentials", "resource": found.resource}
    scope = creds.scope or found.scope
    if scope:
        form["scope"] = scope
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    if creds.private_key is not None:
        if "private_key_jwt" not in found.auth_methods:
            raise OAuthError(
                f"the authorization server {found.issuer} does not take private_key_jwt (it takes {', '.join(found.auth_methods)})"
            )
        import jwt

        key, alg = creds.signing_key()
        claims = {
            "iss": creds.client_id,
            "sub": creds.client_id,
            "aud": found.issuer,
            "jti": secrets.token_urlsafe(16),
            "iat": int(now_unix),
            "exp": int(now_unix) + _ASSERTION_TTL_S,
        }
        form.update(client_id=creds.client_id, client_assertion_type=JWT_BEARER, client_assertion=jwt.encode(claims, key, algorithm=alg))
    elif "client_secret_basic" in found.auth_methods:
        pair = f"{quote(creds.client_id, safe='')}:{quote(str(creds.client_secret), safe='')}"  # RFC 6749 §2.3.1
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif "client_secret_post" in found.auth_methods:
        form.update(client_id=creds.client_id, client_secret=str(creds.client_secret))
    else:
        raise OAuthError(f"the authorization server {found.issuer} takes no client secret (it takes {', '.join(found.auth_methods)})")
    return headers, urlencode(form).encode()


def read_token(status: int, body: bytes) -> Token:
    """The token endpoint's answer: a bearer token, or an :class:`OAuthError` naming the refusal
    (``token endpoint refused the client: http 401 invalid_client``)."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    if status != 200:
        error = doc.get("error") if isinstance(doc, dict) else None
        detail = doc.get("error_description") if isinstance(doc, dict) else None
        raise OAuthError(
            f"token endpoint refused the client: http {status}"
            + (f" {error}" if isinstance(error, str) else "")
            + (f" ({detail})" if isinstance(detail, str) else "")
        )
    if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str) or not doc["access_token"]:
        raise OAuthError("token endpoint answered 200 without an access_token")
    kind = doc.get("token_type")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise OAuthError(f"token endpoint gave a {kind!r} token, not a Bearer token")
    token = doc["access_token"]
    if any(c.isspace() or ord(c) < 32 for c in token):
        raise OAuthError("token endpoint gave an access token with whitespace in it")
    expires = doc.get("expires_in")
    return Token(token, float(expires) if isinstance(expires, (int, float)) and expires > 0 else None)


def refresh_delay(expires_in: float | None, rng: random.Random) -> float | None:
    """Seconds until a token of this lifetime is refreshed (None: it does not expire)."""
    if expires_in is None:
        return None
    share = rng.uniform(*REFRESH_SHARE)
    return max(0.5, min(expires_in * share, expires_in - REFRESH_MARGIN_S))


def _document(body: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        raise OAuthError(f"{what} is not JSON") from None
    if not isinstance(doc, dict):
        raise OAuthError(f"{what} is not a JSON object")
    return doc


def _allowed(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback(parts.hostname or ""):
        return
    raise OAuthError(f"{url}: OAuth endpoints must be https (plain http only on loopback)")


# -- over HTTP ------------------------------------------------------------------------------------------
Fetch = Callable[[str, str, dict[str, str], bytes | None], tuple[int, dict[str, str], bytes]]
"""``fetch(method, url, headers, body) -> (status, headers with lower-case names, body)``."""

Report = Callable[[float, int, BaseException | None], None]
"""``report(ms, response_length, error)``: one token request, for the ``oauth:token`` row."""


class TokenSource:
    """One access token for a process: discovered and fetched by :meth:`start`, refreshed by
    :meth:`refresh_due` before it expires and by :meth:`invalidate` when a server calls it
    ``invalid_token``. Listeners get every new token (the native engines of the process)."""

    def __init__(
        self,
        creds: ClientCredentials,
        url: str,
        fetch: Fetch,
        report: Report | None = None,
        *,
        probe: bytes = b"{}",
        rng: random.Random | None = None,
    ) -> None:
        self.creds = creds
        self.url = url
        self.fetch = fetch
        self.report = report
        self.probe = probe
        self.rng = rng or random.Random()
        self.found: Discovery | None = None
        self.token: Token | None = None
        self.generation = 0
        self.due: float | None = None  # monotonic time of the next refresh
        self.since = 0.0  # monotonic time of the current token
        self.listeners: list[Callable[[str], None]] = []

    @property
    def access_token(self) -> str:
        if self.token is None:
            raise OAuthError("no access token yet")
        return self.token.access_token

    def discover(self) -> Discovery:
        """The protected resource and its authorization server's token endpoint."""
        status, headers, _ = self.fetch(
            "POST", self.url, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, self.probe
        )
        challenge = headers.get("www-authenticate") if status == 401 else None
        www = challenge.encode("latin-1", "replace") if challenge else None
        prm: tuple[str, str, tuple[str, ...]] | None = None
        tried = []
        for candidate in protected_resource_urls(self.url, www):
            if candidate != self.url:
                _allowed(candidate)
            code, _, body = self.fetch("GET", candidate, {"Accept": "application/json"}, None)
            tried.append(f"{candidate} (http {code})")
            if code == 200:
                prm = read_protected_resource(body, self.url)
                break
        if prm is None:
            raise OAuthError("no protected-resource metadata found: tried " + ", ".join(tried))
        resource, issuer, scopes = prm
        _allowed(issuer)
        asked = core.auth_param(www, "scope") if www else None
        tried = []
        for candidate in authorization_server_urls(issuer):
            code, _, body = self.fetch("GET", candidate, {"Accept": "application/json"}, None)
            tried.append(f"{candidate} (http {code})")
            if code == 200:
                endpoint, methods = read_authorization_server(body, issuer)
                _allowed(endpoint)
                self.found = Discovery(resource, issuer, endpoint, methods, asked or (" ".join(scopes) if scopes else None))
                return self.found
        raise OAuthError(f"no metadata for the authorization server {issuer}: tried " + ", ".join(tried))

    def start(self) -> str:
        """Discover, then fetch the first token (raises :class:`OAuthError`)."""
        if self.found is None:
            self.discover()
        return self.refresh()

    def refresh(self) -> str:
        """Ask the token endpoint for a new token now; listeners get it."""
        found = self.found or self.discover()
        headers, body = token_request(self.creds, found, time.time())
        began = time.perf_counter()
        error: BaseException | None = None
        length = 0
        try:
            status, _, answer = self.fetch("POST", found.token_endpoint, headers, body)
            length = len(answer)
            token = read_token(status, answer)
        except OAuthError as exc:
            error = exc
            raise
        except OSError as exc:
            error = OAuthError(f"token endpoint {found.token_endpoint}: {exc}")
            raise error from None
        finally:
            if self.report is not None:
                self.report((time.perf_counter() - began) * 1000.0, length, error)
        self.token = token
        self.since = time.monotonic()
        self.generation += 1
        delay = refresh_delay(token.expires_in, self.rng)
        self.due = None if delay is None else time.monotonic() + delay
        for listener in self.listeners:
            listener(token.access_token)
        return token.access_token

    def invalidate(self, token: str) -> bool:
        """A server refused ``token`` as ``invalid_token``: refresh once if it is still the
        current one (so a burst of refusals of one token asks once). True if it refreshed."""
        if self.token is None or token != self.token.access_token:
            return False
        self.due = time.monotonic()
        return True

    def invalidate_current(self, min_age: float) -> bool:
        """Refusals seen in bulk (a native engine's drained rows) name no token: refresh the
        current one if it is older than ``min_age`` seconds (refusals of its predecessor can
        still arrive that long after a refresh)."""
        if self.token is None or time.monotonic() - self.since < min_age:
            return False
        self.due = time.monotonic()
        return True

    def seconds_to_refresh(self) -> float | None:
        """Seconds until the next refresh is due (0: now; None: never)."""
        return None if self.due is None else max(0.0, self.due - time.monotonic())

"""OAuth 2.1 resource server for the HTTP transport (opt-in).

* RFC 9728 Protected Resource Metadata at ``/.well-known/oauth-protected-resource`` and the
  path-inserted form (``/.well-known/oauth-protected-resource/mcp``).
* ``Authorization: Bearer <JWT>`` on every request, verified with PyJWT against a JWKS (a file,
  or an https URL fetched and cached with a TTL): signature, ``iss``, ``aud`` equal to this
  server's resource URI (RFC 8707), ``exp``/``nbf`` with a small leeway, and the scopes.
* 401 with ``WWW-Authenticate: Bearer resource_metadata="…", scope="…"``; 403
  ``insufficient_scope`` naming every scope the operation needs.

The transport binds sessions to the token's subject (``Principal.subject``). The native
server's lane admits a token the resource server verified by a lookup (``ResourceServer.lend``)
until its expiry or the keys' next fetch, and forgets it when it is refused or the keys change.
"""

from mcpfast.auth.resource import JwksSource, Principal, ResourceServer, TokenSink

__all__ = ["JwksSource", "Principal", "ResourceServer", "TokenSink"]

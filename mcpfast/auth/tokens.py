"""Test keys and tokens: ``mcpfast token`` (for load tests against a protected server)."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

__all__ = ["mint_token", "new_key", "token_command"]


def _kid(public_pem: bytes) -> str:
    import hashlib

    return hashlib.sha256(public_pem).hexdigest()[:16]


def new_key(key_file: str | Path, jwks_file: str | Path | None = None) -> dict[str, Any]:
    """Write a new P-256 private key (PEM, mode 0600) and return (and optionally write) its JWKS."""
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(str(key_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    jwk = json.loads(ECAlgorithm.to_jwk(private.public_key()))
    jwk.update({"kid": _kid(public_pem), "use": "sig", "alg": "ES256"})
    jwks = {"keys": [jwk]}
    if jwks_file is not None:
        Path(jwks_file).write_text(json.dumps(jwks, indent=2) + "\n")
    return jwks


def mint_token(
    key_file: str | Path, *, issuer: str, audience: str, subject: str, scope: str = "", ttl: int = 3600, now: float | None = None
) -> str:
    """Sign an access token (ES256) with the private key in ``key_file``."""
    private = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    issued = int(now if now is not None else time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "iat": issued,
        "nbf": issued,
        "exp": issued + ttl,
        "jti": secrets.token_urlsafe(12),
    }
    if scope:
        claims["scope"] = scope
    return jwt.encode(claims, private, algorithm="ES256", headers={"kid": _kid(public_pem)})  # type: ignore[arg-type]


def token_command(args: Any) -> int:
    """``mcpfast token``: ``--new-key KEYFILE [--jwks FILE]`` or ``--key KEYFILE …`` (prints the token)."""
    if args.new_key:
        jwks = new_key(args.new_key, args.jwks)
        if args.jwks is None:
            print(json.dumps(jwks))
        return 0
    if not args.key:
        print("mcpfast token: give --key KEYFILE (or --new-key KEYFILE --jwks JWKSFILE)", file=sys.stderr)
        return 2
    print(mint_token(args.key, issuer=args.issuer, audience=args.audience, subject=args.subject, scope=args.scope, ttl=args.ttl))
    return 0

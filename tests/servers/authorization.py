"""A small, real OAuth authorization server for the hub's resource-server tests, served over HTTP by the test.

It publishes RFC 8414 metadata, a JSON Web Key Set and an RFC 7662 introspection endpoint, and counts the
requests each receives. Tokens are minted here with joserfc (`mint`), with keys generated when it starts;
`forge` builds the tokens no honest issuer signs (`alg: none`, HMAC keyed with the public key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from joserfc import jwt
from joserfc.jwk import ECKey, Key, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

INTROSPECTION_CLIENT = ("mcp-hub", "hub-secret-1234567890")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class AuthorizationServer:
    """An issuer at `issuer` (its base URL), with an RSA and an EC signing key."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.rsa = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "use": "sig", "alg": "RS256"})
        self.ec = ECKey.generate_key("P-256", parameters={"kid": "ec-1", "use": "sig", "alg": "ES256"})
        self.published: list[Key] = [self.rsa, self.ec]
        self.opaque: dict[str, dict[str, Any]] = {}
        """Opaque token -> its introspection answer."""
        self.requests = {"metadata": 0, "jwks": 0, "introspection": 0}
        self.down = False
        """While true, every endpoint answers 503 (the requests are counted all the same)."""

    def app(self) -> Starlette:
        async def metadata(request: Request) -> JSONResponse:
            self.requests["metadata"] += 1
            if self.down:
                return JSONResponse({"error": "down"}, status_code=503)
            return JSONResponse(
                {
                    "issuer": self.issuer,
                    "jwks_uri": f"{self.issuer}/jwks",
                    "introspection_endpoint": f"{self.issuer}/introspect",
                    "token_endpoint": f"{self.issuer}/token",
                    "response_types_supported": ["code"],
                }
            )

        async def jwks(request: Request) -> JSONResponse:
            self.requests["jwks"] += 1
            if self.down:
                return JSONResponse({"error": "down"}, status_code=503)
            return JSONResponse({"keys": [key.as_dict(private=False) for key in self.published]})

        async def introspect(request: Request) -> JSONResponse:
            self.requests["introspection"] += 1
            if self.down:
                return JSONResponse({"error": "down"}, status_code=503)
            expected = "Basic " + base64.b64encode(":".join(INTROSPECTION_CLIENT).encode()).decode()
            if request.headers.get("authorization") != expected:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            form = await request.form()
            return JSONResponse(self.opaque.get(str(form.get("token")), {"active": False}))

        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", metadata, methods=["GET"]),
                Route("/jwks", jwks, methods=["GET"]),
                Route("/introspect", introspect, methods=["POST"]),
            ]
        )

    def claims(self, audience: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": "alice",
            "aud": audience,
            "client_id": "test-client",
            "scope": "mcp hub:read",
            "iat": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def mint(self, audience: str, *, key: Key | None = None, alg: str = "RS256", **overrides: Any) -> str:
        """A JWT access token for `audience`, signed with `key` (the RSA key unless said)."""
        key = key or self.rsa
        header = {"alg": alg, "kid": key.kid, "typ": "at+jwt"}
        return jwt.encode(header, self.claims(audience, **overrides), key, algorithms=[alg])

    def forge(self, audience: str, alg: str, **overrides: Any) -> str:
        """A token no honest issuer signs: `alg` "none" (no signature), or "HS256" keyed with the RSA public key."""
        header = _b64(json.dumps({"alg": alg, "kid": self.rsa.kid, "typ": "JWT"}).encode())
        payload = _b64(json.dumps(self.claims(audience, **overrides)).encode())
        signing_input = f"{header}.{payload}".encode()
        if alg == "none":
            return f"{header}.{payload}."
        public_pem = self.rsa.as_pem(private=False)
        return f"{header}.{payload}.{_b64(hmac.new(public_pem, signing_input, hashlib.sha256).digest())}"

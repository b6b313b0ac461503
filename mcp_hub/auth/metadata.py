"""What the hub tells clients about itself as a protected resource (RFC 9728), and how it says no.

- The metadata document, served at `/.well-known/oauth-protected-resource` and at its form suffixed
  with the resource's path (`/.well-known/oauth-protected-resource/mcp`, RFC 9728 §3.1), and with the
  endpoint's own path when the hub is reached under another: the resource, its authorization server,
  its scopes, and that tokens go in the `Authorization` header only.
- The `WWW-Authenticate` challenge of every 401 and 403 (RFC 6750 §3, RFC 9728 §5.1, MCP
  authorization): `Bearer` with `resource_metadata`, the `scope` needed, and for a refused token its
  `error` and `error_description`; `DPoP` instead, with the proof algorithms (RFC 9449 section 7.1), to
  a client that used DPoP and wherever DPoP is required.
- With DPoP (auth/dpop.py): the proof algorithms taken (`dpop_signing_alg_values_supported`) and, when
  `dpop = "require"`, `dpop_bound_access_tokens_required` (RFC 9728 section 2).

The document is the MCP SDK's model (`ProtectedResourceMetadata`), served with its CORS handling.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_hub.auth.refusal import Refusal
from mcp_hub.config import OAuthSettings

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(settings: OAuthSettings) -> str:
    """Where clients find the metadata: the well-known URL of the hub's canonical resource URI."""
    return str(build_resource_metadata_url(AnyHttpUrl(settings.resource)))


def scopes_advertised(settings: OAuthSettings) -> list[str]:
    return list(dict.fromkeys((*settings.scopes_required, *settings.scopes_supported)))


def metadata_document(settings: OAuthSettings) -> dict[str, Any]:
    """The metadata as JSON: the SDK's model, validated, with the issuer exactly as configured (the model would
    add a slash to a root URL, and a client compares it with the issuer's own metadata)."""
    document = ProtectedResourceMetadata(
        resource=AnyHttpUrl(settings.resource),
        authorization_servers=[AnyHttpUrl(settings.issuer)],
        scopes_supported=scopes_advertised(settings) or None,
        bearer_methods_supported=["header"],
        resource_name=settings.resource_name,
        dpop_signing_alg_values_supported=list(settings.dpop_algorithms),
        dpop_bound_access_tokens_required=True if settings.dpop == "require" else None,
    ).model_dump(mode="json", exclude_none=True)
    return {**document, "resource": settings.resource, "authorization_servers": [settings.issuer]}


def metadata_routes(settings: OAuthSettings, endpoint_path: str) -> list[Route]:
    """The metadata's routes: the bare well-known path, and it suffixed with the resource's and the endpoint's paths."""
    document = metadata_document(settings)

    async def metadata(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    handler = cors_middleware(metadata, ["GET", "OPTIONS"])
    resource_path = urlsplit(settings.resource).path.rstrip("/")
    paths = dict.fromkeys((WELL_KNOWN, WELL_KNOWN + resource_path, WELL_KNOWN + endpoint_path.rstrip("/")))
    return [Route(path, endpoint=handler, methods=["GET", "OPTIONS"]) for path in paths]


def challenge(settings: OAuthSettings, refusal: Refusal | None = None, *, dpop: bool = False) -> str:
    """The `WWW-Authenticate` value answering a request without a token (`refusal` None) or with a refused one:
    a `DPoP` challenge, with the proof algorithms taken (RFC 9449 section 7.1), when `dpop` (the client used
    that scheme), when the refusal is DPoP's, or when the hub takes DPoP-bound tokens only; else `Bearer`."""
    parts: list[str] = []
    dpop = dpop or settings.dpop == "require" or (refusal is not None and refusal.scheme == "DPoP")
    if dpop:
        parts.append(f'algs="{" ".join(settings.dpop_algorithms)}"')
    if refusal is not None and refusal.error is not None:
        parts.append(f'error="{refusal.error}"')
        parts.append(f'error_description="{_quotable(refusal.description)}"')
    parts.append(f'resource_metadata="{metadata_url(settings)}"')
    scopes = list(refusal.scopes if refusal is not None and refusal.scopes is not None else settings.scopes_required)
    if scopes:
        parts.append(f'scope="{" ".join(scopes)}"')
    return ("DPoP " if dpop else "Bearer ") + ", ".join(parts)


def _quotable(text: str) -> str:
    """`text` as an RFC 6750 error_description may hold it: printable ASCII without `"` and `\\`."""
    return "".join(c if 0x20 <= ord(c) <= 0x7E and c not in '"\\' else "?" for c in text)

"""Streamable HTTP: the MCP endpoint, `/healthz` and `/readyz` in one Starlette app.

A POST to the MCP endpoint goes, by its headers (read once, by `Doors`), to one of three doors:
a 2026-07-28 request to modern.py, a request on an established handshake-era session to
handshake.py, anything else to the SDK's own path (sdk_path.py). A door that finds it cannot
serve a request as the SDK would hands it to the SDK's path, body and all. With replicas
(`[cluster]`), replicas.py stands in front of them: a request for another replica's session or
parked call goes to that replica.

With API keys or OAuth ([auth.oauth]) configured, every request to the MCP endpoint must carry
a credential (`auth.middleware.Credentials`): an API key (`Authorization: Bearer KEY` or
`X-API-Key: KEY`), whose name becomes the request's principal, or an access token, whose claims
name it; the policy maps the principal to a profile. With OAuth, the protected resource metadata
(RFC 9728) is served at `/.well-known/oauth-protected-resource` and its path-suffixed forms.
Without either, HTTP clients are the principal "anonymous".

The hub adds its consent page, `/oauth/consent/ID`, and `/oauth/callback` (`routes`), where a person's
sign-in toward a `mode = "user"` mount comes back (credentials/user.py); they need no credential (a
browser brings them). With replicas, one that another replica began is forwarded there (replicas.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx2
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import (
    DEFAULT_SESSION_IDLE_TIMEOUT,
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.auth.metadata import metadata_routes
from mcp_hub.auth.middleware import Credentials, StepUp
from mcp_hub.cluster import Cluster
from mcp_hub.config import OAuthSettings
from mcp_hub.sdk import server as sdk_server
from mcp_hub.server.http.acceptance import Acceptance
from mcp_hub.server.http.cards import Cards
from mcp_hub.server.http.cors import BrowserOrigins
from mcp_hub.server.http.fields import FieldValues
from mcp_hub.server.http.handshake import HandshakeRequests
from mcp_hub.server.http.modern import ModernRequests
from mcp_hub.server.http.replicas import Replicas, SignIns
from mcp_hub.server.http.sdk_path import SdkPath, defer_sse_for_posts
from mcp_hub.server.hub_server import session_connections
from mcp_hub.server.lane import lane_of
from mcp_hub.server.parking import ParkingLot
from mcp_hub.tls import verifying

_LOOPBACK = ("127.0.0.1", "localhost", "::1")

MAX_REQUEST_BODY = 32 * 1024 * 1024
"""The largest request body the MCP endpoint takes (larger ones are answered 413).

The SDK's default, 4 MiB, would refuse a tool call carrying a document or an
image that the server behind the hub takes; a stdio server's answers may be
twice this large (`upstream.transports.MAX_LINE_BYTES`).
"""


def build_app(
    server: Server[Any],
    *,
    host: str,
    path: str,
    health: Callable[[], dict[str, Any]],
    ready: Callable[[], bool] | None = None,
    api_keys: Mapping[str, str] | None = None,
    oauth: OAuthSettings | None = None,
    max_request_body: int = MAX_REQUEST_BODY,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    cors_origins: Sequence[str] = (),
    endpoints: Mapping[str, Server[Any]] | None = None,
    admin: ASGIApp | None = None,
    cluster: Cluster | None = None,
    parking: ParkingLot | None = None,
    parkings: Mapping[str, ParkingLot] | None = None,
    routes: Sequence[BaseRoute] = (),
    step_up: StepUp | None = None,
    cards: Cards | None = None,
) -> ASGIApp:
    """The ASGI app: MCP at `path`, hub and mount status at `/healthz` and `/readyz`; each curated endpoint's
    server of `endpoints` (`[endpoints.NAME]`, server/curated.py) at `path/NAME`, behind the same door (the
    same checks of Host, Origin and credentials), with sessions of its own. Another `path/NAME` is answered
    404 with a JSON body that says so.

    `/healthz` answers 503 when the hub is down; `/readyz` answers the same report,
    with 503 until `ready()` (without `ready`: when `/healthz` does). `GET /` says where the MCP endpoint is.

    Bound to a loopback address, the endpoint refuses other Host and Origin
    headers (DNS rebinding protection), as the SDK does for its own servers;
    the origins in `cors_origins` are allowed too. Web pages from those origins
    may call the endpoint from a browser (CORS, see cors.py); no others may.

    Header values reach the endpoint without the whitespace around them (fields.py).

    `routes` are served beside them, as they are (the hub's `/oauth/callback`, for instance).
    `step_up` names the scopes the policy asks of an OAuth caller for the item a request calls
    (auth/middleware.py): a token without them is answered 403 insufficient_scope.

    A handshake-era session with no HTTP request in flight for `session_idle_timeout`
    seconds is closed (its id is then answered 404); None: sessions never expire.

    `admin`: the admin console (mcp_hub/admin/), served at `/admin`.

    `cards`: the server cards of the endpoints, at `path/server-card` and `path/NAME/server-card`, and their
    catalog at `/.well-known/mcp/catalog.json` (cards.py), served without credentials.

    With a `cluster` (and the endpoint's `parking` lot; `parkings`: each curated endpoint's), requests for
    another replica's session or parked call are forwarded to it, and so are the sign-in pages and callbacks
    of a sign-in another replica began (replicas.py).
    """
    sdk_server.install()  # the SSE encoder's fast line split (sdk/server.py)
    defer_sse_for_posts()
    security = None
    if host in _LOOPBACK:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *cors_origins],
        )
    http, verifier, proofs = None, None, None
    if oauth is not None:  # the token checks (and joserfc, cryptography's keys) load only for a hub that takes tokens
        from mcp_hub.auth.dpop import ProofChecker
        from mcp_hub.auth.verifier import TokenVerifier

        http = httpx2.AsyncClient(verify=verifying(), follow_redirects=False)
        verifier = TokenVerifier(oauth, http)
        proofs = ProofChecker(
            algorithms=oauth.dpop_algorithms,
            max_age=oauth.dpop_proof_age,
            leeway=oauth.leeway,
            resource=oauth.resource,
            claim=cluster.claim if cluster is not None else None,
        )

    replicas: list[Replicas | SignIns] = []

    def door(endpoint: ASGIApp, parking: ParkingLot | None = None, below: str = "") -> ASGIApp:
        """What every MCP endpoint is behind: credentials, browser origins, with a cluster the other replicas
        (`below`: the endpoint's path below `path`), header values (fields.py)."""
        if api_keys or verifier is not None:
            endpoint = Credentials(endpoint, api_keys=api_keys, verifier=verifier, step_up=step_up, proofs=proofs)
        if cors_origins:
            endpoint = BrowserOrigins(endpoint, cors_origins)
        if cluster is not None and parking is not None:
            endpoint = Replicas(endpoint, cluster, parking, max_request_body, below)
            replicas.append(endpoint)
        return FieldValues(endpoint)

    managers: list[StreamableHTTPSessionManager] = []

    def served(server: Server[Any], parking: ParkingLot | None, below: str = "") -> ASGIApp:
        """An MCP endpoint serving `server`, with a session manager of its own."""
        manager = StreamableHTTPSessionManager(
            app=server,
            security_settings=security,
            max_request_body_size=max_request_body,
            session_idle_timeout=session_idle_timeout,
        )
        managers.append(manager)
        sdk = StreamableHTTPASGIApp(manager)
        sdk_path = SdkPath(sdk)
        lane = lane_of(server)
        acceptance = Acceptance(security)
        return door(
            Doors(
                sdk,
                sdk_path,
                HandshakeRequests(manager, session_connections(server), lane, max_request_body, sdk_path, acceptance),
                None
                if manager.json_response
                else ModernRequests(manager, lane, max_request_body, sdk_path, acceptance),
            ),
            parking,
            below,
        )

    async def healthz(request: Request) -> JSONResponse:
        report = health()
        return JSONResponse(report, status_code=200 if report["status"] != "down" else 503)

    async def readyz(request: Request) -> JSONResponse:
        report = health()
        is_ready = ready() if ready is not None else report["status"] != "down"
        return JSONResponse(report, status_code=200 if is_ready else 503)

    async def home(request: Request) -> JSONResponse:
        """`GET /`: where the MCP endpoint is, for a person who opened the hub's address in a browser."""
        return JSONResponse(
            {
                "message": f"This is an MCP hub: connect an MCP client to {path} (streamable HTTP). "
                "Its servers' status is at /healthz.",
                "mcp": path,
                "endpoints": [f"{path.rstrip('/')}/{name}" for name in endpoints or {}],
                "health": "/healthz",
                "ready": "/readyz",
            }
        )

    endpoint = served(server, parking)
    curated = {
        f"{path.rstrip('/')}/{name}": served(named, (parkings or {}).get(name), f"/{name}")
        for name, named in (endpoints or {}).items()
    }
    unknown = door(_unknown_endpoint)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with AsyncExitStack() as stack:
                for manager in managers:
                    await stack.enter_async_context(manager.run())
                yield
        finally:
            if http is not None:
                await http.aclose()
            for front in replicas:
                await front.aclose()

    app = Starlette(
        routes=[
            Route(path, endpoint=endpoint),
            *(Route(below, endpoint=named) for below, named in curated.items()),
            Route("/healthz", endpoint=healthz, methods=["GET"]),
            Route("/readyz", endpoint=readyz, methods=["GET"]),
            *([Route("/", endpoint=home, methods=["GET"])] if path != "/" else ()),
            *routes,
            *(cards.routes() if cards is not None else ()),
            *(_metadata_routes(oauth, [path, *curated]) if oauth is not None else ()),
            *([Mount("/admin", app=admin)] if admin is not None else ()),
        ],
        lifespan=lifespan,
    )
    routed: ASGIApp = app
    if cluster is not None:  # a sign-in another replica began goes to it
        routed = SignIns(app, cluster, path, max_request_body)
        replicas.append(routed)
    card_paths = frozenset(cards.paths()) if cards is not None else frozenset()
    return _Front(routed, path, endpoint, curated, unknown, card_paths)


def _metadata_routes(oauth: OAuthSettings, paths: Sequence[str]) -> list[Route]:
    """The protected resource metadata, also at the well-known path suffixed with each endpoint's path."""
    routes: dict[str, Route] = {}
    for path in paths:
        for route in metadata_routes(oauth, path):
            routes.setdefault(route.path, route)
    return list(routes.values())


async def _unknown_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    """A path below the MCP endpoint's that no `[endpoints.NAME]` table names."""
    body = {
        "error": "unknown_endpoint",
        "message": f"no MCP endpoint at {scope['path']}: the hub's endpoints are its [endpoints.NAME] tables",
    }
    await JSONResponse(body, status_code=404)(scope, receive, send)


class Doors:
    """Pure ASGI app: a POST to the MCP endpoint, to the door its headers (read once) choose.

    - A 2026-07-28 version (`MCP-Protocol-Version`), no `Mcp-*` header repeated: `modern`.
    - An `Mcp-Session-Id`, with a handshake-era version or none: `handshake`.
    - Anything else, and what a door does not serve: the SDK's path (`sdk_path`; other methods: `sdk`).
    """

    def __init__(
        self, sdk: ASGIApp, sdk_path: SdkPath, handshake: HandshakeRequests, modern: ModernRequests | None
    ) -> None:
        self._sdk = sdk
        self._sdk_path = sdk_path
        self._handshake = handshake
        self._modern = modern

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._sdk(scope, receive, send)
            return
        headers: dict[str, str] = {}
        repeated = False
        for key, value in scope["headers"]:
            name = key.decode("latin-1")
            if name in headers:
                repeated = repeated or name.startswith("mcp-")
                continue
            headers[name] = value.decode("latin-1")
        if repeated:  # the handshake door reads the last of each (the modern one takes none)
            session_id, version = _last_session_headers(scope)
        else:
            session_id, version = headers.get("mcp-session-id"), headers.get("mcp-protocol-version")
        if version in MODERN_PROTOCOL_VERSIONS and not repeated and self._modern is not None:
            await self._modern.serve(scope, receive, send, headers)
        elif session_id is not None and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS):
            await self._handshake.serve(scope, receive, send, session_id, headers)
        else:
            await self._sdk_path.serve(scope, receive, send, session_id is not None)


def _last_session_headers(scope: Scope) -> tuple[str | None, str | None]:
    """The last `Mcp-Session-Id` and `MCP-Protocol-Version` of a request that repeats a header."""
    session_id = version = None
    for key, value in scope["headers"]:
        if key == b"mcp-session-id":
            session_id = value.decode("latin-1")
        elif key == b"mcp-protocol-version":
            version = value.decode("latin-1")
    return session_id, version


class _Front:
    """The ASGI app: requests for the MCP endpoint's path go straight to it; everything else (the health
    routes, other paths, the lifespan) to the Starlette app, which routes the endpoint's path the same way.

    Starlette's error and exception middleware and its router cost each MCP request about as much as the
    hub's own routing of a call; the endpoint's middleware handles its own errors."""

    def __init__(
        self,
        app: ASGIApp,
        path: str,
        endpoint: ASGIApp,
        curated: Mapping[str, ASGIApp],
        unknown: ASGIApp,
        cards: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self._cards = cards
        """The server cards' paths, below the endpoint's but the app's to serve (cards.py)."""
        self._path = path
        self._endpoint = endpoint
        self._curated = curated
        """The curated endpoints, by path (`path/NAME`)."""
        self._below = path.rstrip("/") + "/"
        self._unknown = unknown

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("root_path"):
            await self.app(scope, receive, send)
        elif scope["path"] == self._path:
            await self._endpoint(scope, receive, send)
        elif scope["path"].startswith(self._below) and scope["path"] not in self._cards:
            await self._curated.get(scope["path"], self._unknown)(scope, receive, send)
        else:
            await self.app(scope, receive, send)

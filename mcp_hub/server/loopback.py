"""People's sign-ins when the hub is served over stdio: the `/oauth/callback` on a loopback listener.

A desktop client (Claude Desktop and the like) launches `mcp-hub serve` over stdio: the hub then
serves no HTTP at all, so a person's browser, sent to sign in to a `mode = "user"` mount
(credentials/user.py), would come back to a `/oauth/callback` that nothing answers. When such a
mount's `redirect_uri` is a loopback http address with a port (`http://127.0.0.1:8765/oauth/callback`,
`localhost`, `[::1]`: the native-app redirect of RFC 8252 §7.3), `sign_in_listeners` serves the
hub's sign-in routes (credentials/user.py's `sign_in_routes()`, handed in by the hub) there, on
loopback only; mounts that share a port share one listener.

The listeners live as long as the hub, not only while a sign-in is pending:

- A port another program holds is then found when the hub starts, and the hub does not start
  (`ConfigError`, naming the mount, its `redirect_uri` and the port), rather than when a person is
  half-way through signing in, with the error only in a log of the desktop client they never read.
- A sign-in link stays good for `LOGIN_SECONDS`, longer than a call waits for it, and a client that
  was answered with the link (-32042) retries whenever the person is done: a listener opened per
  sign-in would have to stay open that long anyway, and one per link would race for the port.
- The port is the hub's anyway: the redirect URI is registered with the authorization server. An
  idle listener costs one socket on loopback, and answers nothing but a callback whose `state` the
  hub issued (good once; anything else is a 400 page).

A live reload of hub.toml (live.py) applies to the listeners too (`SignInListeners.apply`): a `user`
mount added with a loopback `redirect_uri` gets its listener, a port no mount names any more is let go,
and a mount moved to another path below a listener is routed there without a restart. A port another
program holds is logged, naming the mount, and tried again when a reload next changes the servers (or
when the hub restarts).

Any other `redirect_uri` (an https address, a host that is not loopback: the hub behind a proxy or
served over HTTP elsewhere) is left alone; a loopback one without a port (port 80) gets no listener
and a warning, since the hub would need to be root to take it.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import anyio
import anyio.abc
import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount

from mcp_hub.config import USER_CALLBACK_PATH, HubConfig
from mcp_hub.errors import ConfigError

logger = logging.getLogger("mcp_hub.server")


@dataclass
class _Listener:
    """One loopback address and port, and the mounts whose callback it serves (under their paths' prefixes)."""

    host: str
    port: int
    prefixes: dict[str, str] = field(default_factory=dict)
    """Path prefix before /oauth/callback -> the first mount that uses it."""


def loopback_listeners(config: HubConfig) -> list[_Listener]:
    """The listeners the enabled `user` mounts' loopback `redirect_uri`s need (see the module docstring)."""
    found: dict[tuple[str, int], _Listener] = {}
    for name, server in config.enabled_servers().items():
        auth = server.auth
        if auth.mode != "user":
            continue
        parts = urlsplit(auth.redirect_uri)
        host = _loopback(parts.hostname) if parts.scheme == "http" else None
        if host is None:
            continue
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            logger.warning(
                "server %r: its redirect_uri %s names no port; over stdio no sign-in can complete there: "
                "add one, as in http://127.0.0.1:8765%s",
                name,
                auth.redirect_uri,
                USER_CALLBACK_PATH,
            )
            continue
        listener = found.setdefault((host, port), _Listener(host, port))
        listener.prefixes.setdefault(parts.path.removesuffix(USER_CALLBACK_PATH).rstrip("/"), name)
    return list(found.values())


def _loopback(hostname: str | None) -> str | None:
    """The address to listen on for a redirect to `hostname`, if it is loopback (`localhost`: 127.0.0.1)."""
    if hostname is None:
        return None
    if hostname.lower() == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(hostname)
    except ValueError:
        return None
    return str(address) if address.is_loopback else None


@asynccontextmanager
async def sign_in_listeners(
    config: HubConfig, routes: Callable[[], Sequence[BaseRoute]]
) -> AsyncIterator[SignInListeners]:
    """Serve the sign-in `routes` on every loopback `redirect_uri`'s port (see the module docstring) while in
    the block, kept to the configuration a live reload brings (`SignInListeners.apply`).

    Raises:
        ConfigError: a port cannot be taken (another program listens there), on entering.
    """
    listeners = SignInListeners(routes)
    bound = listeners.bind(config)
    async with anyio.create_task_group() as tg:
        listeners.serve_in(tg, bound)
        try:
            yield listeners
        finally:
            listeners.close()


@dataclass
class _Serving:
    server: uvicorn.Server
    app: Starlette
    prefixes: dict[str, str]


class SignInListeners:
    """The loopback listeners the `user` mounts of the configuration need, and their routes.

    A live reload applies its configuration (`apply`): a listener no mount needs any more stops, one a mount
    now needs starts, and one whose mounts moved below other paths routes them there without a restart.
    """

    def __init__(self, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self._routes = routes
        self._tg: anyio.abc.TaskGroup | None = None
        self._serving: dict[tuple[str, int], _Serving] = {}

    def bind(self, config: HubConfig) -> list[tuple[_Listener, socket.socket]]:
        """A listening socket for each listener `config` needs that is not served yet; `ConfigError` for a port
        that cannot be taken (and none is kept)."""
        bound: list[tuple[_Listener, socket.socket]] = []
        try:
            for listener in loopback_listeners(config):
                if (listener.host, listener.port) not in self._serving:
                    bound.append((listener, _socket(config, listener)))
        except ConfigError:
            for _, sock in bound:
                sock.close()
            raise
        return bound

    def serve_in(self, tg: anyio.abc.TaskGroup, bound: list[tuple[_Listener, socket.socket]]) -> None:
        """Serve the `bound` listeners in `tg`, and those that `apply` starts later."""
        self._tg = tg
        self._start(bound)

    def apply(self, config: HubConfig) -> None:
        """Listen where `config` needs it from now on (a live reload).

        Raises:
            ConfigError: a port cannot be taken; nothing new started, the rest applied.
        """
        wanted = {(listener.host, listener.port): listener for listener in loopback_listeners(config)}
        for key in [key for key in self._serving if key not in wanted]:
            self._serving.pop(key).server.should_exit = True
            logger.info("sign-ins no longer come back to http://%s: no user-mode server names it", _netloc(*key))
        for key, listener in wanted.items():
            serving = self._serving.get(key)
            if serving is not None and serving.prefixes != listener.prefixes:
                serving.app.router.routes[:] = self._routed(listener.prefixes)
                serving.prefixes = dict(listener.prefixes)
        self._start(self.bind(config))

    def close(self) -> None:
        for serving in self._serving.values():
            serving.server.should_exit = True
        self._serving.clear()

    def _start(self, bound: list[tuple[_Listener, socket.socket]]) -> None:
        assert self._tg is not None
        for listener, sock in bound:
            app = Starlette(routes=self._routed(listener.prefixes))
            server = _server(app)
            self._serving[(listener.host, listener.port)] = _Serving(server, app, dict(listener.prefixes))
            self._tg.start_soon(_serve, server, sock)
            where = _netloc(listener.host, listener.port)
            logger.info("sign-ins to user-mode servers come back to http://%s%s", where, USER_CALLBACK_PATH)

    def _routed(self, prefixes: Mapping[str, str]) -> list[BaseRoute]:
        served: list[BaseRoute] = []
        for prefix in prefixes:
            served.extend(self._routes() if not prefix else [Mount(prefix, routes=list(self._routes()))])
        return served


async def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    try:
        await server.serve([sock])
    finally:
        sock.close()


def _socket(config: HubConfig, listener: _Listener) -> socket.socket:
    """A socket listening on the listener's address; `ConfigError` for a port that cannot be taken."""
    family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not another listener's: a closed one's
    try:
        sock.bind((listener.host, listener.port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        mount = next(iter(listener.prefixes.values()))
        why = "is in use by another program" if exc.errno == errno.EADDRINUSE else f"cannot be taken ({exc})"
        raise ConfigError(
            config.path,
            f"servers.{mount}.auth.redirect_uri",
            f"port {listener.port} on {listener.host} {why}; served over stdio, the hub listens there for "
            "the sign-ins of user-mode servers: stop the other program, or choose a free port in "
            "redirect_uri (and register it with the authorization server)",
        ) from None
    return sock


def _server(app: Starlette) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_config=None,  # the hub's logging, on standard error: standard output is the client's wire
        access_log=False,
    )
    return _Quiet(config)


class _Quiet(uvicorn.Server):
    """Uvicorn, minus its signal handling: the hub's own stops it."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

"""The admin console on replicas sharing one Redis (`[cluster]`): one set of sessions, one login throttle.

Real parts only: a real `redis-server` on a free loopback port (tests/test_cluster.py's), two in-process hubs
with the console on and `[cluster] redis` set, each serving its HTTP app (`Hub.http_app`) on its own port, and
an HTTP client speaking to both.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import redis

from mcp_hub.admin import console
from mcp_hub.config import load_config
from mcp_hub.hub import Hub
from tests.conftest import free_port, running_hub, serve_app, wait_for
from tests.harness.console import ADMIN_KEY, attempt, console_config, logged_in, throttled
from tests.harness.oidc import browse, oidc_login_provider
from tests.redis_server import RedisServer
from tests.test_admin_sso import CONSOLE_CLIENT, PEOPLE, needs_oidc_provider, sso_settings

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@asynccontextmanager
async def console_replicas(
    tmp_path: Path, url: str, count: int = 2, hubs: list[Hub] | None = None
) -> AsyncIterator[list[str]]:
    """`count` hubs with the console on and `[cluster] redis = url`, each served on its own port: their base URLs
    (and the hubs, appended to `hubs`)."""
    async with AsyncExitStack() as stack:
        bases = []
        for index in range(count):
            folder = tmp_path / f"replica{index}"
            folder.mkdir()
            path = console_config(folder, tail=f'\n[cluster]\nredis = "{url}"\n')
            hub = await stack.enter_async_context(running_hub(load_config(path, environ={"ADMIN_KEY": ADMIN_KEY})))
            if hubs is not None:
                hubs.append(hub)
            app = hub.http_app("127.0.0.1", console(hub, "127.0.0.1"))
            bases.append(await stack.enter_async_context(serve_app(app)))
        yield bases


async def test_a_session_is_every_replicas_and_a_logout_on_one_ends_it_on_all(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    async with console_replicas(tmp_path, redis_server.url) as (a, b), httpx2.AsyncClient() as web:
        await logged_in(web, a)
        cookie = web.cookies["mcp_hub_admin"]
        async with httpx2.AsyncClient(cookies={"mcp_hub_admin": cookie}) as replay:
            on_b = await replay.get(f"{b}/admin/status")
            assert on_b.status_code == 200 and 'signed in as <b id="admin-name">root</b>' in on_b.text
            csrf = on_b.text.split('name="csrf" value="')[1].split('"')[0]
            assert (await replay.post(f"{b}/admin/logout", data={"csrf": csrf})).status_code == 303
        async with httpx2.AsyncClient(cookies={"mcp_hub_admin": cookie}) as replay:
            for base in (a, b):
                refused = await replay.get(f"{base}/admin/status")
                assert refused.status_code == 303 and refused.headers["location"] == "/admin/login"


async def test_login_attempts_are_counted_across_replicas(tmp_path: Path, redis_server: RedisServer) -> None:
    """Five attempts with one key from one address, made on either replica, use up that key's budget on both."""
    async with console_replicas(tmp_path, redis_server.url) as (a, b), httpx2.AsyncClient() as web:
        wrong = "wrong-key-" + "w" * 20
        for base in (a, b, a, b, a):
            assert (await attempt(web, base, wrong, "10.0.0.1")).status_code == 401
        assert throttled(await attempt(web, b, wrong, "10.0.0.1"))
        assert throttled(await attempt(web, a, wrong, "10.0.0.1"))
        assert (await attempt(web, b, wrong, "10.0.0.2")).status_code == 401


async def test_while_redis_is_down_a_login_is_the_replicas_own_until_redis_is_back(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """Redis stops answering (its process is stopped, `SIGSTOP`: it keeps what it holds, and its port takes
    connections that nothing answers): the session kept there cannot be read, so the administrator logs in again,
    on that replica; once Redis answers again (`SIGCONT`), that session ends, and the one kept in Redis holds
    again."""
    hubs: list[Hub] = []
    async with console_replicas(tmp_path, redis_server.url, count=1, hubs=hubs) as (a,), httpx2.AsyncClient() as web:
        cluster = hubs[0].cluster
        assert cluster is not None
        await logged_in(web, a)
        shared = web.cookies["mcp_hub_admin"]
        asker = redis.Redis(port=redis_server.port)
        try:
            pid = int(asker.info("server")["process_id"])
        finally:
            asker.close()
        os.kill(pid, signal.SIGSTOP)
        try:
            assert (await web.get(f"{a}/admin/status")).status_code == 303
            assert not cluster.up
            web.cookies.clear()
            await logged_in(web, a)  # kept by this replica
            local = web.cookies["mcp_hub_admin"]
            assert not cluster.up
        finally:
            os.kill(pid, signal.SIGCONT)
        await wait_for(lambda: cluster.up, timeout=20)
        for cookie, status in ((local, 303), (shared, 200)):
            async with httpx2.AsyncClient(cookies={"mcp_hub_admin": cookie}) as replay:
                assert (await replay.get(f"{a}/admin/status")).status_code == status


@needs_oidc_provider
async def test_a_single_sign_on_begun_on_one_replica_completes_on_another(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """The identity provider sends the browser back to replica b (as a load balancer may), though replica a began
    the sign-in: b finds it in Redis, takes it once, and the session is good on both."""
    ports = free_port(), free_port(), free_port()
    a, b = (f"http://127.0.0.1:{port}" for port in ports[:2])
    client = {
        "client_id": CONSOLE_CLIENT[0],
        "client_secret": CONSOLE_CLIENT[1],
        "redirect_uris": [f"{b}/admin/sso/callback"],
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    environ = {"ADMIN_KEY": ADMIN_KEY, "CONSOLE_OIDC_SECRET": CONSOLE_CLIENT[1]}
    async with (
        oidc_login_provider(ports[2], {}, [client], PEOPLE) as issuer,
        AsyncExitStack() as stack,
        httpx2.AsyncClient() as web,
    ):
        for index, port in enumerate(ports[:2]):
            folder = tmp_path / f"replica{index}"
            folder.mkdir()
            tail = sso_settings(issuer, redirect_uri=f"{b}/admin/sso/callback")
            path = console_config(folder, tail=f'{tail}\n[cluster]\nredis = "{redis_server.url}"\n')
            hub = await stack.enter_async_context(running_hub(load_config(path, environ=environ)))
            await stack.enter_async_context(serve_app(hub.http_app("127.0.0.1", console(hub, "127.0.0.1")), port))
        start = await web.get(f"{a}/admin/sso/start")
        assert start.status_code == 303
        back = await browse(start.headers["location"], "alice", f"{b}/admin/sso/callback")
        assert (await web.get(back)).status_code == 200
        assert (await web.get(back)).status_code == 400  # taken once, by b, for both
        for base in (a, b):
            status = await web.get(f"{base}/admin/status")
            assert 'signed in as <b id="admin-name">alice@example.com</b>' in status.text

"""npm's oidc-provider (tests/npm/oidc_login_provider.mjs) as a child process, and a person's browser at its
login and consent pages (an HTTP client filling them in)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2

from tests.conftest import ROOT
from tests.harness.oauth import NODE

SCRIPT = ROOT / "tests" / "npm" / "oidc_login_provider.mjs"


@asynccontextmanager
async def oidc_login_provider(
    port: int,
    resources: dict[str, str],
    clients: list[dict[str, Any]],
    accounts: dict[str, dict[str, Any]] | None = None,
    *,
    id_token_claims: bool = False,
    options: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[str]:
    """oidc-provider as a child process (tests/npm/oidc_login_provider.mjs): `accounts`, the people's claims by
    login name; `id_token_claims`, those claims in the ID token too (else in the userinfo answer only);
    `options`, more of its settings ("cimd", "registration"); `env`, more of its environment. Yields its
    issuer."""
    settings = json.dumps(
        {
            "port": port,
            "resources": resources,
            "clients": clients,
            "accounts": accounts or {},
            "idTokenClaims": id_token_claims,
            **(options or {}),
        }
    )
    environ = {**os.environ, **env} if env is not None else None
    command = [str(NODE), str(SCRIPT), settings]
    async with await anyio.open_process(command, cwd=SCRIPT.parent, env=environ) as process:
        try:
            assert process.stdout is not None
            with anyio.fail_after(30):
                assert (await process.stdout.receive()).startswith(b"ready")
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await process.wait()


async def browse(url: str, login: str, until: str, browser: httpx2.AsyncClient | None = None) -> str:
    """What a person's browser (a new one, unless given) does at oidc-provider with an authorization URL: follow
    its redirects, fill its login page with `login` (any password), press Continue on its consent page, until
    it sends the browser to a URL beginning with `until` (the client's redirect URI), which is returned, not
    opened."""
    async with AsyncExitStack() as stack:
        if browser is None:
            browser = await stack.enter_async_context(httpx2.AsyncClient(timeout=30, follow_redirects=False))
        response = await browser.get(url)
        for _ in range(20):
            if response.is_redirect:
                location = urljoin(str(response.url), response.headers["location"])
                if location.startswith(until):
                    return location
                response = await browser.get(location)
                continue
            assert response.status_code == 200, response.text
            action = re.search(r'<form[^>]*action="([^"]+)"[^>]*method="post"', response.text)
            assert action is not None, response.text
            fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', response.text))
            if 'name="login"' in response.text:
                fields |= {"login": login, "password": "any password"}
            response = await browser.post(urljoin(str(response.url), html.unescape(action[1])), data=fields)
        raise AssertionError(f"the sign-in did not come back to {until}")


@contextmanager
def oidc_provider_process(
    port: int, clients: list[dict[str, Any]], accounts: dict[str, dict[str, Any]], *, host: str = "127.0.0.1"
) -> Iterator[str]:
    """oidc-provider as a child process, for a test that is not async (a browser's): its issuer, `host` naming
    it (it listens on 127.0.0.1), once it serves its metadata."""
    settings = json.dumps({"port": port, "resources": {}, "clients": clients, "accounts": accounts, "host": host})
    process = subprocess.Popen(
        [str(NODE), str(SCRIPT), settings], cwd=SCRIPT.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    issuer = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _serving(f"http://127.0.0.1:{port}/.well-known/openid-configuration"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"oidc-provider did not start (exit code {process.poll()})")
            time.sleep(0.05)  # polling a child process's start-up, bounded by the deadline
        yield issuer
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serving(url: str) -> bool:
    try:
        return httpx2.get(url, timeout=2).status_code == 200
    except httpx2.TransportError:
        return False


def installed() -> bool:
    """Whether node and oidc-provider are installed in tests/npm."""
    return NODE.exists() and (ROOT / "tests" / "npm" / "node_modules" / "oidc-provider").exists()

"""The dashboard on replicas sharing one Redis (`[cluster]`): each publishes its series, and any replica's overview
shows the sum over all of them and how many it saw; without Redis, each shows its own.

Real parts only: a real `redis-server` (tests/redis_server.py), three in-process hubs with the console on and
`[cluster] redis` set, each serving its HTTP app on its own port (test_cluster_admin.py's `console_replicas`), the
SDK's client calling each replica's MCP endpoint, and an HTTP client reading the consoles.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_hub.hub import Hub
from tests.conftest import wait_for
from tests.harness.console import logged_in
from tests.redis_server import RedisServer
from tests.test_cluster_admin import console_replicas
from tests.test_dashboard import client_as

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_the_overview_sums_three_replicas_and_counts_them(tmp_path: Path, redis_server: RedisServer) -> None:
    hubs: list[Hub] = []
    async with console_replicas(tmp_path, redis_server.url, count=3, hubs=hubs) as bases:
        # replica i serves i + 1 echoes to alice; the last one also refuses bob a tool his profile leaves out
        for index, base in enumerate(bases):
            async with client_as(base, "alice") as alice:
                for _ in range(index + 1):
                    await alice.call_tool("srv_echo", {"text": "x"})
        async with client_as(bases[2], "bob") as bob:
            with pytest.raises(Exception, match="srv_fail"):
                await bob.call_tool("srv_fail", {"message": "no"})

        async with httpx2.AsyncClient(timeout=10) as web:
            await logged_in(web, bases[0])
            data: dict[str, Any] = {}

            async def summed() -> bool:
                data.update((await web.get(f"{bases[0]}/admin/dashboard/data.json")).json())
                return data["replicas"] == 3 and data["hub"]["calls"] == 7

            await wait_for(summed, timeout=20)  # each replica publishes every 2 s
            page = (await web.get(f"{bases[0]}/admin/dashboard")).text
            # the replica's own rings hold only its own calls
            assert hubs[0].dashboard is not None
            own = hubs[0].dashboard.rings.total(("hub",), hubs[0].dashboard.now(), 360)

            # Redis gone: each replica shows its own numbers, and says so
            redis_server.kill()
            cluster = hubs[0].cluster
            assert cluster is not None
            await wait_for(lambda: not cluster.up, timeout=20)
            web.cookies.clear()
            await logged_in(web, bases[0])  # the session kept in Redis is gone with it: a login of this replica's
            alone = (await web.get(f"{bases[0]}/admin/dashboard/data.json")).json()
            alone_page = (await web.get(f"{bases[0]}/admin/dashboard")).text

    assert data["shared"] is True
    assert data["tools"]["srv_echo"]["calls"] == 6
    assert data["principals"]["alice"]["calls"] == 6
    assert data["principals"]["bob"]["decisions"] == {"denied": 1}
    assert data["mounts"]["srv"]["calls"] == 7 and "up" in data["mounts"]["srv"]["states"]
    assert "Summed over <b id=replica-count>3</b> replica(s)" in page
    assert re.search(r'<tr data-tool="srv_echo">.*?<td class=calls>6</td>', page)
    assert own.calls == 1
    assert alone["shared"] is False and alone["replicas"] == 1 and alone["hub"]["calls"] == 1
    assert "This replica's own numbers." in alone_page

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

from mcp_hub.cluster import Cluster
from mcp_hub.config import TelemetrySettings
from mcp_hub.hub import Hub
from mcp_hub.observe.dashboard import Dashboard
from mcp_hub.observe.otel import MountStatus, Telemetry
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


async def test_slots_no_replica_writes_any_more_are_read_once_and_still_summed(redis_server: RedisServer) -> None:
    """Two replicas' dashboards (each its hub's telemetry and its own connection to Redis) on one clock the test
    moves: what they published in a slot is summed while the slot is current, and still once it is settled (read
    once, then kept), and an hour later it is gone."""
    now = [1_800_000_000.0]
    sides = []
    for _ in range(2):
        telemetry = Telemetry(TelemetrySettings())
        cluster = Cluster(redis_server.url)
        dashboard = Dashboard(telemetry, cluster, clock=lambda: now[0])
        telemetry.start(lambda: [MountStatus("srv", True, 0, 0, "up")])
        sides.append((telemetry, cluster, dashboard))
    try:
        for count, (telemetry, _, dashboard) in enumerate(sides, start=1):
            assert telemetry.request_duration is not None
            for _ in range(count):
                telemetry.request_duration.record(
                    0.01, {"mcp.method.name": "tools/call", "mcp_hub.outcome": "ok", "mcp_hub.mount": "srv"}
                )
            await dashboard.tick()
        reader = sides[0][2]
        current = await reader.view()
        assert current.shared and current.replicas == 2
        assert current.rings.total(("hub",), current.last, 360).calls == 3
        now[0] += 30  # three slots later: the slot is settled, and nobody published since
        settled = await reader.view()
        assert settled.replicas == 1  # only itself, as no other replica wrote lately
        assert settled.rings.total(("mount", "srv"), settled.last, 360).calls == 3
        again = await reader.view()  # read from what it kept
        assert again.rings.total(("hub",), again.last, 360).calls == 3
        now[0] += 3600
        assert (await reader.view()).rings.total(("hub",), again.last + 360, 360).calls == 0
    finally:
        for telemetry, cluster, _ in sides:
            telemetry.shutdown()
            await cluster.aclose()

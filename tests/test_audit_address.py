"""The client's network address in the audit line (`client_address`, the last field) and in OCSF's
`src_endpoint.ip`; `[http] forwarded_allow_ips`, the proxies whose `X-Forwarded-For` names the client.

End to end, the hub is `mcp-hub serve --transport http` (tests/harness/cluster.py starts it, here without a
cluster), its upstream the counting test server over stdio, its client the SDK's over streamable HTTP."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.observe.audit_log import AuditEvent
from tests.conftest import ROOT, wait_for
from tests.harness.cluster import Replica, start_replica
from tests.test_audit_sinks import BASE, ocsf_of

KEY = "k" * 32

BEFORE = [
    "time", "decision_id", "principal", "session", "method", "mount", "name", "via", "arguments", "outcome", "rule",
    "reason", "latency_ms", "policy_revision", "issuer", "subject", "client_id", "results", "cost", "cut",
]  # fmt: skip
"""The audit line's fields before the client's address came: their order does not change."""


def test_the_address_is_a_new_last_field_and_the_others_keep_their_order() -> None:
    assert [field.name for field in fields(AuditEvent)] == [*BEFORE, "client_address"]
    line = json.loads(replace(BASE, client_address="203.0.113.9").to_json())
    assert list(line) == [*BEFORE, "client_address"] and line["client_address"] == "203.0.113.9"
    assert json.loads(BASE.to_json())["client_address"] is None


@pytest.mark.parametrize(
    ("address", "ip"),
    [("203.0.113.9", "203.0.113.9"), ("2001:DB8::1", "2001:db8::1"), ("fe80::1%eth0", "fe80::1"), (None, None)],
)
def test_ocsf_src_endpoint_carries_the_ip(address: str | None, ip: str | None) -> None:
    ocsf = ocsf_of(replace(BASE, client_address=address))
    assert ocsf["src_endpoint"] == {"uid": "s-1", "name": "MCP client", **({"ip": ip} if ip else {})}
    assert "client_address" not in ocsf.get("unmapped", {})
    admin = ocsf_of(replace(BASE, session=None, via="admin-console", client_address=address))
    assert admin["src_endpoint"] == {"name": "admin-console", **({"ip": ip} if ip else {})}


def test_an_address_that_is_not_an_ip_is_kept_unmapped() -> None:
    ocsf = ocsf_of(replace(BASE, client_address="/run/hub.sock"))
    assert "ip" not in ocsf["src_endpoint"] and ocsf["unmapped"]["client_address"] == "/run/hub.sock"


def test_forwarded_allow_ips_is_checked_naming_the_key() -> None:
    assert parse_config("").http.forwarded_allow_ips is None
    taken = parse_config('[http]\nforwarded_allow_ips = ["10.0.0.5", "10.1.0.0/16", "::1", "*"]\n')
    assert taken.http.forwarded_allow_ips == ("10.0.0.5", "10.1.0.0/16", "::1", "*")
    assert parse_config("[http]\nforwarded_allow_ips = []\n").http.forwarded_allow_ips == ()
    for wrong in ('"proxy.example.com"', '"10.1.0.1/16"'):
        with pytest.raises(ConfigError, match=r"http\.forwarded_allow_ips\[0\]: .* is not an address or a network"):
            parse_config(f"[http]\nforwarded_allow_ips = [{wrong}]\n")


def hub_toml(extra: str = "") -> str:
    return f"""
[servers.up]
command = "{sys.executable}"
args = ["-m", "tests.servers.counting"]
cwd = "{ROOT}"
env = {{ PYTHONPATH = "{ROOT}" }}

[auth]
api_keys = {{ alice = "{KEY}" }}

[audit]
file = "audit.jsonl"

[http]
{extra}
"""


async def call_through(replica: Replica, forwarded_for: str) -> dict[str, object]:
    """One tools/call by alice, sent as if through a proxy naming `forwarded_for`: its audit line."""
    headers = {"Authorization": f"Bearer {KEY}", "X-Forwarded-For": forwarded_for}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(replica.url, http_client=http), cache=None) as client,
    ):
        await client.call_tool("up_lookup", {"q": 1})
    audit = replica.folder / "audit.jsonl"

    def calls() -> list[dict[str, object]]:
        text = audit.read_text(encoding="utf-8") if audit.exists() else ""
        return [line for line in map(json.loads, text.splitlines()) if line["method"] == "tools/call"]

    await wait_for(lambda: bool(calls()))
    (line,) = calls()
    return line


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_served_hub_writes_the_clients_address_and_trusts_only_the_proxies_it_is_told(
    tmp_path: Path,
) -> None:
    """By default a proxy on loopback is trusted (uvicorn's default): the address it names is the client's; with
    `forwarded_allow_ips = []`, none is, and the line holds the peer's own address."""
    hubs: list[Replica] = []
    try:
        for name, extra in (("default", ""), ("none", "forwarded_allow_ips = []")):
            start = functools.partial(start_replica, tmp_path / name, "", toml=hub_toml(extra))
            hubs.append(await anyio.to_thread.run_sync(start))
        with anyio.fail_after(60):
            trusted = await call_through(hubs[0], "203.0.113.9")
            untrusted = await call_through(hubs[1], "203.0.113.9")
        assert trusted["client_address"] == "203.0.113.9" and trusted["principal"] == "alice"
        assert untrusted["client_address"] == "127.0.0.1"
    finally:
        for replica in hubs:
            replica.process.terminate()
            try:
                replica.process.wait(10)
            except subprocess.TimeoutExpired:
                replica.kill()

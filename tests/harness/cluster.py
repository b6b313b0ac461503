"""Hub replicas sharing one Redis, each a real `mcp-hub serve` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

from tests.conftest import ROOT, forked, free_port, hub_command

KEYS = {"alice": "a" * 32, "carol": "c" * 32}


POLICY = """
[principals]
alice = "user"
carol = "careful"

[profiles.user]
default = "allow"

[profiles.careful]
default = "allow"
[[profiles.careful.rules]]
id = "ask-first"
effect = "confirm"
tools = ["up/ask", "up/lookup"]
"""


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[bytes]
    folder: Path

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def hub_toml(redis_url: str, work_ms: int = 0, servers: tuple[str, ...] = ("up",)) -> str:
    """A replica's hub.toml: `servers`, each tests/servers/counting.py over stdio in the handshake era."""
    keys = ", ".join(f'{name} = "{key}"' for name, key in KEYS.items())
    program, *launch = forked("tests.servers.counting", [sys.executable, "-m", "tests.servers.counting"])
    args = ", ".join(f'"{a}"' for a in [*launch, "--work-ms", str(work_ms)])
    mounts = "".join(
        f"""
[servers.{name}]
command = "{program}"
args = [{args}]
cwd = "{ROOT}"
env = {{ PYTHONPATH = "{ROOT}" }}
protocol = "legacy"
"""
        for name in servers
    )
    return f"""{mounts}
[auth]
api_keys = {{ {keys} }}

[policy]
dir = "policies"

[cluster]
redis = "{redis_url}"
"""


def start_replica(
    folder: Path,
    redis_url: str,
    work_ms: int = 0,
    servers: tuple[str, ...] = ("up",),
    *,
    toml: str | None = None,
    port: int | None = None,
) -> Replica:
    """`mcp-hub serve --transport http` with `[cluster] redis = redis_url`, up and registered (`toml`: its
    hub.toml, instead of `hub_toml`'s; `port`: the one it serves on, instead of a free one)."""
    return until_ready(launch_replica(folder, redis_url, work_ms, servers, toml=toml, port=port))


def launch_replica(
    folder: Path,
    redis_url: str,
    work_ms: int = 0,
    servers: tuple[str, ...] = ("up",),
    *,
    toml: str | None = None,
    port: int | None = None,
) -> Replica:
    """`start_replica`'s process, started but not yet waited for (`until_ready`): replicas start side by side."""
    folder.mkdir(parents=True)
    port = port or free_port()
    (folder / "policies").mkdir()
    (folder / "policies" / "hub.toml").write_text(textwrap.dedent(POLICY), encoding="utf-8")
    (folder / "hub.toml").write_text(toml or hub_toml(redis_url, work_ms, servers), encoding="utf-8")
    command = hub_command("serve", "--transport", "http", "--port", str(port))
    command += ["--config", str(folder / "hub.toml")]
    environ = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (folder / "hub.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=folder, env=environ, stdout=log, stderr=subprocess.STDOUT)
    return Replica(f"http://127.0.0.1:{port}/mcp", process, folder)


def until_ready(replica: Replica) -> Replica:
    """The launched replica, once ready: its mount up, and (before it serves HTTP) registered in Redis."""
    ready = httpx2.URL(replica.url).copy_with(path="/readyz")
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx2.get(ready, timeout=1).status_code == 200:
                return replica
        except httpx2.HTTPError:
            pass
        if time.monotonic() > deadline or replica.process.poll() is not None:
            replica.kill()
            raise RuntimeError(f"the replica did not come up: {(replica.folder / 'hub.log').read_text()}")
        time.sleep(0.05)

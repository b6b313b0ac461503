"""A real `redis-server` (Debian's package; `.ci/run` installs it) on a free loopback port, for the tests of
replicas sharing one Redis (`[cluster]`). The fixture `redis_server` (tests/conftest.py) gives a test its own."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import free_port

REDIS_SERVER = shutil.which("redis-server")


class RedisServer:
    """A redis-server on a loopback port, with no persistence, that a test can kill and start again."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._directory = directory
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        options = ["--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        options += ["--dir", str(self._directory), "--daemonize", "no", "--loglevel", "warning"]
        self._process = subprocess.Popen([REDIS_SERVER, *options], stdout=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self._process.poll() is not None:
                    raise
                time.sleep(0.02)
            finally:
                client.close()

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            self._process = None

    def commands(self) -> dict[str, int]:
        """How many times each command ran since it started (INFO commandstats)."""
        client = redis.Redis(port=self.port)
        try:
            stats = client.info("commandstats")
        finally:
            client.close()
        return {name.removeprefix("cmdstat_"): int(value["calls"]) for name, value in stats.items()}


def started_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for a fixture to yield from (skips the test where none is installed)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.kill()

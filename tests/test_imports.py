"""A hub loads what its configuration uses: the libraries of the features it leaves off are never imported, which
saves start-up time (every `mcp-hub serve` imports them first) and memory. (`redis`: see test_cluster.py.)"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

OPTIONAL = {
    "snowballstemmer": "tool search ([search], a profile's tool_search): its stemmer, with every language's",
    "joserfc": "[auth.oauth]: the access tokens' checks",
    "authlib.integrations": "a mount's OAuth credential: the exchanges with its authorization server",
    "limits": "[policy] dir: the rate limits",
    "tomlkit": "mcp-hub import",
    "aiohttp": "a streamable HTTP mount: the client its requests go out on (about 0.15 s of every start)",
    "mcp_hub.admin": "[admin]: the web console",
    "mcp_hub.auth.verifier": "[auth.oauth]",
    "mcp_hub.importer": "mcp-hub import",
    "mcp_hub.server_card": "mcp-hub add URL: reading a server's card",
    "mcp_hub.skills_server": "mcp-hub-skills, a server of its own",
    "bpe_openai": "the result budget's tokenizer: loaded by the first result over its budget in bytes",
    "PIL": "the result budget's images: loaded by the first result with an image over its budget",
}
"""What a hub without the feature does not load -> the feature."""

SERVING_HTTP = {
    "mcp_hub.server.http": "its streamable HTTP app, with its auth, CORS and replica routes",
    "mcp_hub.auth.metadata": "its OAuth protected resource metadata routes",
}
"""What a hub serving stdio (as an MCP client launches it) does not load -> what it is for."""

SCRIPT = """
import sys
from mcp_hub.cli import main
from mcp_hub.config import load_config
from mcp_hub.hub import Hub
hub = Hub(load_config(sys.argv[1]))
if sys.argv[2] == 'http':
    hub.http_app('127.0.0.1')
for name in sys.argv[3:]:
    if any(loaded == name or loaded.startswith(name + '.') for loaded in sys.modules):
        print(name)
"""


def loaded_by(tmp_path: Path, transport: str, names: Iterable[str]) -> list[str]:
    """Which of `names` a fresh interpreter has loaded once it imported the CLI and the hub and built a hub of one
    stdio server, and, for "http", its HTTP app."""
    config = tmp_path / "hub.toml"
    config.write_text('[servers.time]\ncommand = "true"\n', encoding="utf-8")
    found = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config), transport, *names],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return found.stdout.split()


def test_a_hub_loads_only_what_its_config_uses(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "http", OPTIONAL)
    assert loaded == [], "loaded without their feature: " + ", ".join(f"{name} ({OPTIONAL[name]})" for name in loaded)


def test_a_hub_serving_stdio_loads_nothing_of_http_serving(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path, "stdio", [*OPTIONAL, *SERVING_HTTP])
    assert loaded == [], "loaded by a hub serving stdio: " + ", ".join(
        f"{name} ({OPTIONAL.get(name) or SERVING_HTTP[name]})" for name in loaded
    )

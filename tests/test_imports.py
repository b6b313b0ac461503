"""A hub loads what its configuration uses: the libraries of the features it leaves off are never imported, which
saves start-up time (every `mcp-hub serve` imports them first) and memory. (`redis`: see test_cluster.py.)"""

from __future__ import annotations

import subprocess
import sys
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

SCRIPT = """
import sys
from mcp_hub.cli import main
from mcp_hub.config import load_config
from mcp_hub.hub import Hub
hub = Hub(load_config(sys.argv[1]))
hub.http_app('127.0.0.1')
for name in sys.argv[2:]:
    if any(loaded == name or loaded.startswith(name + '.') for loaded in sys.modules):
        print(name)
"""


def test_a_hub_loads_only_what_its_config_uses(tmp_path: Path) -> None:
    config = tmp_path / "hub.toml"
    config.write_text('[servers.time]\ncommand = "true"\n', encoding="utf-8")
    found = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(config), *OPTIONAL],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = found.stdout.split()
    assert loaded == [], "loaded without their feature: " + ", ".join(f"{name} ({OPTIONAL[name]})" for name in loaded)

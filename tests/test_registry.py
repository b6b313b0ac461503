"""`mcp-hub add NAME[@VERSION]` and `mcp-hub registry search TEXT` against a registry of the test's own
(tests/servers/registry.py: the registry's read API on loopback, entries of real shapes).

The npm and PyPI entries' tables start and list their tools: npx finds the npm package pinned in tests/npm (the hub
runs from there, as a project with the package installed, so npx needs no network); this machine has no uv, so a
stand-in `uvx` on PATH runs the PyPI package from the environment beside the hub after checking that it is the
pinned version, as `uvx PKG==VERSION` would run it from uv's cache.
"""

from __future__ import annotations

import os
import sys
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from mcp_hub.cli import main
from mcp_hub.config import load_config
from mcp_hub.errors import ConfigError
from mcp_hub.server_json import server_table
from tests.conftest import ROOT, hub_client, running_hub, serve_app
from tests.servers.registry import THINKING, TIME, registry_app

Run = Callable[..., tuple[int, str, str]]

EXISTING = """\
# my hub, kept as I wrote it
[hub]
name = "mine"  # the name clients see

[servers.notes]
command = "notes-server"  # a server of my own
"""


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    """The registry's base URL, served from a thread of its own (the CLI under test is synchronous)."""
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(serve_app(registry_app())) as url:
        yield url


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], registry: str) -> Run:
    """`mcp-hub ARGS` in this process against the test registry: (exit code, stdout, stderr)."""

    def run(*args: str, registry_option: bool = True) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exit:
            main([*args, *(["--registry", registry] if registry_option else [])])
        captured = capsys.readouterr()
        return int(exit.value.code or 0), captured.out, captured.err

    return run


@pytest.fixture
def hub_toml(tmp_path: Path) -> Path:
    path = tmp_path / "hub.toml"
    path.write_text(EXISTING, encoding="utf-8")
    return path


def added(path: Path, name: str) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))["servers"][name]


def test_npm_entry_becomes_a_pinned_npx_table_in_the_existing_file(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.modelcontextprotocol/sequential-thinking", "--config", str(hub_toml))
    assert code == 0, err
    text = hub_toml.read_text(encoding="utf-8")
    assert text.startswith(EXISTING)  # comments and layout kept
    assert added(hub_toml, "sequential-thinking") == {
        "command": "npx",
        "args": ["-y", f"@modelcontextprotocol/server-sequential-thinking@{THINKING}"],
        "env": {"DISABLE_THOUGHT_LOGGING": "false"},
    }
    assert "# Set to true to stop logging thoughts to stderr; one of true, false\n" in text
    assert f"[servers.sequential-thinking] to {hub_toml}" in err
    load_config(hub_toml)  # a valid hub.toml


def test_a_version_is_added_as_asked_and_an_unknown_one_names_those_there_are(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.modelcontextprotocol/sequential-thinking@2025.7.1", "--config", str(hub_toml))
    assert code == 0, err
    assert added(hub_toml, "sequential-thinking")["args"][-1].endswith("@2025.7.1")
    code, _, err = run("add", "io.github.modelcontextprotocol/sequential-thinking@9.9.9", "--config", str(hub_toml))
    assert code == 2
    assert (
        f"has no version 9.9.9 of io.github.modelcontextprotocol/sequential-thinking; it has {THINKING}, 2025.7.1"
        in err
    )


def test_pypi_entry_becomes_a_pinned_uvx_table_with_its_arguments(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "new" / "hub.toml"
    path.parent.mkdir()
    code, _, err = run("add", "io.github.modelcontextprotocol/time", "--config", str(path))
    assert code == 0, err
    assert added(path, "time") == {"command": "uvx", "args": [f"mcp-server-time=={TIME}", "--local-timezone", "UTC"]}
    text = path.read_text(encoding="utf-8")
    assert '[sandbox]\nprofile = "standard"' in text  # a new hub.toml: the protections first, as `import` writes
    assert (path.parent / "policies").is_dir()


def test_secret_is_referenced_never_written_and_named_for_export(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.modelcontextprotocol.anonymous/brave-search", "--config", str(hub_toml))
    assert code == 0, err
    table = added(hub_toml, "brave-search")
    assert table["env"] == {"BRAVE_API_KEY": "${BRAVE_API_KEY}"}
    assert table["args"] == ["-y", "@modelcontextprotocol/server-brave-search@1.0.2"]
    assert table["sandbox"] == "network"  # it is given a credential for a service
    assert "note: export these before serving: BRAVE_API_KEY" in err
    assert "# export BRAVE_API_KEY before serving: Brave Search API Key; required; a secret" in hub_toml.read_text()


def test_oci_entry_becomes_docker_run_with_its_arguments_and_variables(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.example/database-manager", "--config", str(hub_toml))
    assert code == 0, err
    table = added(hub_toml, "database-manager")
    assert table["command"] == "docker"
    assert table["args"] == [
        *("run", "-i", "--rm"),
        *("-e", "DB_USERNAME", "-e", "DB_PASSWORD", "-e", "SSL_MODE"),
        *("--network", "host", "-e", "DB_TYPE=${DATABASE_MANAGER_DB_TYPE}"),
        "docker.io/example/database-manager-mcp:3.1.0",
        *("--host", "localhost", "${DATABASE_MANAGER_DATABASE_NAME}"),
    ]
    assert table["env"] == {"DB_USERNAME": "${DB_USERNAME}", "DB_PASSWORD": "${DB_PASSWORD}", "SSL_MODE": "prefer"}
    assert table["sandbox"] == "off"
    text = hub_toml.read_text(encoding="utf-8")
    assert '# DB_LOG_FILE = "${DB_LOG_FILE}"  (optional: remove the "#" to pass it on)' in text
    assert "# optional argument --port left out: Database port" in text
    assert (
        "note: export these before serving: "
        "DATABASE_MANAGER_DB_TYPE, DATABASE_MANAGER_DATABASE_NAME, DB_USERNAME, DB_PASSWORD" in err
    )
    variables = ("DATABASE_MANAGER_DB_TYPE", "DATABASE_MANAGER_DATABASE_NAME", "DB_USERNAME", "DB_PASSWORD")
    server = load_config(hub_toml, environ=dict.fromkeys(variables, "x")).servers["database-manager"]
    assert server.enabled and server.sandbox is not None and server.sandbox.profile == "off"


def test_remote_entry_becomes_a_url_with_its_transport_and_headers(run: Run, hub_toml: Path) -> None:
    code, _, err = run(
        "add", "io.modelcontextprotocol.anonymous/hybrid-mcp", "--use", "remote", "--config", str(hub_toml)
    )
    assert code == 0, err
    assert added(hub_toml, "hybrid-mcp") == {
        "url": "https://mcp.anonymous.modelcontextprotocol.io/http",
        "transport": "streamable-http",
        "headers": {"X-API-Key": "${HYBRID_MCP_X_API_KEY}", "X-Region": "us-east-1"},
    }
    assert "HYBRID_MCP_X_API_KEY" in err


def test_remote_url_and_header_templates_are_filled_from_their_variables(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "com.example/weather", "--config", str(hub_toml), "--name", "forecast")
    assert code == 0, err
    assert added(hub_toml, "forecast") == {
        "url": "https://eu.weather.example.com/sse",
        "transport": "sse",
        "headers": {"Authorization": "Bearer ${FORECAST_TOKEN}"},
    }
    assert "note: the registry marks this version deprecated: use com.example/weather2" in err


def test_package_of_an_entry_with_remotes_gets_the_network(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.modelcontextprotocol.anonymous/hybrid-mcp", "--config", str(hub_toml))
    assert code == 0, err
    table = added(hub_toml, "hybrid-mcp")
    assert table["args"] == ["-y", "@example/hybrid-mcp-server@1.5.0", "--mode", "local"]
    assert table["sandbox"] == "network"
    assert "sandbox: the network, as its registry entry also names a remote service" in hub_toml.read_text()


def test_a_name_already_there_is_an_error_unless_forced(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.modelcontextprotocol/time", "--name", "notes", "--config", str(hub_toml))
    assert code == 2
    assert "servers.notes: a server named 'notes' already exists; rename or remove it, or use --force" in err
    assert hub_toml.read_text(encoding="utf-8") == EXISTING
    code, _, err = run(
        "add", "io.github.modelcontextprotocol/time", "--name", "notes", "--force", "--config", str(hub_toml)
    )
    assert code == 0, err
    assert added(hub_toml, "notes")["command"] == "uvx"


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("com.example/no-version", "packages[0].version: is missing; a package's version must be given, to pin it"),
        ("com.example/ranged", "packages[0].version: '^1.2.0' is not one version (a range, or latest)"),
        ("com.example/gem", "packages[0].registryType: 'gem' packages are not supported: the hub runs npm, pypi"),
        ("com.example/no-identifier", "packages[0].identifier: is missing; the registry entry is incomplete"),
        ("com.example/untagged", "packages[0].identifier: names no tag or digest, and the package no version"),
        ("com.example/nameless-version", "version: is missing; the registry entry is incomplete"),
        ("io.github.joelverhagen/knapcode-samplemcpserver", "'nuget' packages are not supported"),
        ("com.example/embedded", "offers no package and no remote to run"),
        ("com.example/absent", "has no server named com.example/absent; `mcp-hub registry search TEXT` finds names"),
        ("com.example/gem@^1.0", "'^1.0' is not one version; write NAME@1.2.3 for that version"),
        ("weather", "a registry name is NAMESPACE/NAME"),
    ],
)
def test_a_malformed_entry_or_reference_is_a_clear_error(
    run: Run, hub_toml: Path, reference: str, message: str
) -> None:
    code, _, err = run("add", reference, "--config", str(hub_toml))
    assert code == 2
    assert err.startswith("error: ") and message in err, err
    assert hub_toml.read_text(encoding="utf-8") == EXISTING


def test_a_mount_name_given_must_be_one(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.modelcontextprotocol/time", "--name", "My Time", "--config", str(hub_toml))
    assert code == 2
    assert "error: --name: 'My Time' is not a mount name: lowercase letters, digits and '-'" in err


def test_use_names_a_kind_the_entry_does_not_offer(run: Run, hub_toml: Path) -> None:
    code, _, err = run("add", "io.github.modelcontextprotocol/time", "--use", "oci", "--config", str(hub_toml))
    assert code == 2
    assert "offers no oci (it offers pypi); choose one of those with --use" in err


def test_search_prints_name_version_kinds_and_description(run: Run, hub_toml: Path) -> None:
    code, out, err = run("registry", "search", "modelcontextprotocol", "--config", str(hub_toml))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "VERSION", "KINDS", "DESCRIPTION"]
    rows = {line.split()[0]: line.split(maxsplit=3)[1:] for line in lines[1:]}
    assert rows == {
        "io.github.modelcontextprotocol/sequential-thinking": [
            THINKING,
            "npm",
            "Dynamic and reflective problem-solving through thought sequences",
        ],
        "io.github.modelcontextprotocol/time": [TIME, "pypi", "Time and timezone conversion capabilities"],
        "io.modelcontextprotocol.anonymous/brave-search": [
            "1.0.2",
            "npm",
            "MCP server for Brave Search API integration",
        ],
        "io.modelcontextprotocol.anonymous/hybrid-mcp": [
            "1.5.0",
            "npm,remote",
            "MCP server available as both local package and remote service",
        ],
    }
    assert lines[1].index(THINKING) == lines[0].index("VERSION")  # columns line up
    code, out, _ = run("registry", "search", "example", "--limit", "2", "--config", str(hub_toml))
    assert len(out.splitlines()) == 4
    assert out.splitlines()[-1] == "(the first 2; more with --limit, or narrow TEXT)"


def test_search_finding_nothing_says_so(run: Run, hub_toml: Path) -> None:
    code, out, _ = run("registry", "search", "nothing-like-it", "--config", str(hub_toml))
    assert code == 0
    assert "has 'nothing-like-it' in its name" in out


def test_the_registry_comes_from_hub_toml_unless_given(run: Run, registry: str, tmp_path: Path) -> None:
    path = tmp_path / "hub.toml"
    path.write_text(f'[hub]\nregistry = "{registry}/"\n', encoding="utf-8")
    code, out, err = run("registry", "search", "time", "--config", str(path), registry_option=False)
    assert code == 0, err
    assert "io.github.modelcontextprotocol/time" in out
    load_config(path)  # the key is part of the configuration
    path.write_text('[hub]\nregistry = "registry.example.com"\n', encoding="utf-8")
    code, _, err = run("registry", "search", "time", "--config", str(path), registry_option=False)
    assert code == 2
    assert f"error: {path}: hub.registry: 'registry.example.com' is not a registry's base URL" in err


def test_an_unreachable_registry_or_another_api_is_a_clear_error(run: Run, registry: str) -> None:
    code, _, err = run("registry", "search", "x", "--registry", "http://127.0.0.1:9", registry_option=False)
    assert code == 2
    assert "error: http://127.0.0.1:9: cannot reach the registry (" in err
    code, _, err = run("registry", "search", "x", "--registry", f"{registry}/elsewhere", registry_option=False)
    assert code == 2
    assert "answered HTTP 404 to GET /v0.1/servers; try again later, or another registry" in err


# -- entries converted directly (server_json, no registry) ----------------------------------


def converted(**package: Any) -> str:
    """The table (as TOML) made of an entry with one npm package: these fields over a plain one's."""
    plain = {"registryType": "npm", "identifier": "pkg", "version": "1.0.0", "transport": {"type": "stdio"}}
    entry = {"name": "com.example/pkg", "version": "1.0.0", "packages": [{**plain, **package}]}
    return server_table({"server": entry}, where="test").document().as_string()


def test_braces_their_variables_do_not_define_stay_and_dollars_are_escaped() -> None:
    arguments = [
        {"type": "positional", "value": "--config={not_a_variable}"},
        {"type": "named", "name": "--price", "value": "$5 for {item}", "variables": {"item": {"default": "tea"}}},
    ]
    table = tomllib.loads(converted(packageArguments=arguments))["servers"]["pkg"]
    assert table["args"] == ["-y", "pkg@1.0.0", "--config={not_a_variable}", "--price", "$$5 for tea"]


def test_a_secret_with_a_default_is_still_only_referenced() -> None:
    text = converted(environmentVariables=[{"name": "API_TOKEN", "isSecret": True, "default": "sk-live-123"}])
    assert tomllib.loads(text)["servers"]["pkg"]["env"] == {"API_TOKEN": "${API_TOKEN}"}
    assert "sk-live-123" not in text


def test_a_package_serving_http_is_refused_with_the_remote_to_use_instead() -> None:
    with pytest.raises(ConfigError) as caught:
        converted(transport={"type": "streamable-http", "url": "http://localhost:{port}/mcp"})
    assert caught.value.key == "packages[0].transport"
    assert "use the entry's remote (--use remote)" in caught.value.reason


def test_a_remote_url_naming_an_undefined_variable_is_an_error() -> None:
    entry = {"name": "com.example/r", "version": "1", "remotes": [{"type": "sse", "url": "https://{host}/sse"}]}
    with pytest.raises(ConfigError) as caught:
        server_table({"server": entry}, where="test")
    assert caught.value.key == "remotes[0].url"
    assert caught.value.reason == "names {host}, which its variables do not define; fix the entry"


def test_a_package_on_another_registry_than_npmjs_says_so() -> None:
    text = converted(registryBaseUrl="https://npm.example.com")
    assert "# the package is on https://npm.example.com, not https://registry.npmjs.org: point npm" in text


# -- the tables start ------------------------------------------------------------------------


@pytest.fixture
def uvx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in `uvx` first on PATH: runs `PKG==VERSION ARGS` from the packages installed beside the hub, after
    checking the installed version is the pinned one (this machine has no uv, and the tests no network)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "uvx"
    script.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "from importlib.metadata import version\n"
        "name, _, pinned = sys.argv[1].partition('==')\n"
        "if version(name) != pinned:\n"
        "    sys.exit(f'uvx stand-in: {name} {version(name)} is installed, not {pinned}')\n"
        "program = os.path.join(os.path.dirname(sys.executable), name)\n"
        "os.execv(program, [program, *sys.argv[2:]])\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return script


@pytest.mark.slow
@pytest.mark.anyio
async def test_npm_and_pypi_tables_start_and_list_their_tools(
    run: Run, tmp_path: Path, uvx: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hub.toml"
    path.write_text("[results]\nmax_result_tokens = 0\n", encoding="utf-8")
    for reference in ("io.github.modelcontextprotocol/sequential-thinking", "io.github.modelcontextprotocol/time"):
        code, _, err = run("add", reference, "--config", str(path))
        assert code == 0, err
    monkeypatch.chdir(ROOT / "tests" / "npm")  # npx finds the pinned package installed here: no network
    async with running_hub(load_config(path), settle=60) as hub, hub_client(hub) as client:
        names = sorted(tool.name for tool in (await client.list_tools()).tools)
    assert names == ["sequential-thinking_sequentialthinking", "time_convert_time", "time_get_current_time"]

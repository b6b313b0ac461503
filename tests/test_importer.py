"""Tests for mcp_hub.importer: client JSON configs -> hub.toml, secret redaction, merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomlkit
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_hub.config import MOUNT_NAME_PATTERN, HubConfig, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.importer import import_client_config, merge_into, secret_env_names

GITHUB_PAT = "ghp_LiteralSecret0123456789"
REMOTE_TOKEN = "sk-live-remote-token-abc"

CLAUDE_DESKTOP = json.dumps(
    {
        "mcpServers": {
            "GitHub": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": GITHUB_PAT, "PATH": "/usr/bin", "PRICE": "$5"},
            },
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
                "cwd": "/tmp",
                "disabled": True,
                "autoApprove": ["read_file"],
            },
            "remote": {
                "url": "https://mcp.example.com/sse",
                "type": "sse",
                "headers": {"Authorization": f"Bearer {REMOTE_TOKEN}", "X-Client": "hub"},
            },
            "streamable": {"url": "https://mcp.example.com/mcp"},
        }
    }
)

VSCODE = """{
  // Inputs are prompted on first server start, then stored securely by VS Code.
  "inputs": [
    {"type": "promptString", "id": "github-pat", "description": "GitHub PAT", "password": true},
  ],
  "servers": {
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": {"Authorization": "Bearer ${input:github-pat}"}
    },
    /* a local one */
    "fetch": {
      "type": "stdio",
      "command": "uvx",
      "args": ["mcp-server-fetch", "--dir", "${env:HOME}/fetch"],
      "env": {"API_KEY": "${input:fetch_key}"},
      "envFile": "${workspaceFolder}/.env",
    },
  },
}"""


def imported(data: dict | str, file: str = "client.json") -> tuple[tomlkit.TOMLDocument, str]:
    doc = import_client_config(data if isinstance(data, str) else json.dumps(data), file)
    return doc, doc.as_string()


def round_trip(text: str, doc: tomlkit.TOMLDocument) -> HubConfig:
    return parse_config(text, file="hub.toml", environ={name: "value" for name in secret_env_names(doc)})


def mcp_servers(**servers: dict) -> dict:
    return {"mcpServers": servers}


# -- Claude Desktop / Cursor / Windsurf --------------------------------------------------------


def test_claude_desktop_sample() -> None:
    _, text = imported(CLAUDE_DESKTOP, "claude_desktop_config.json")
    config = parse_config(text, environ={"GITHUB_PERSONAL_ACCESS_TOKEN": "t", "REMOTE_AUTHORIZATION": "r"})
    assert list(config.servers) == ["github", "filesystem", "remote", "streamable"]
    github = config.servers["github"]
    assert (github.command, github.args) == ("npx", ("-y", "@modelcontextprotocol/server-github"))
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "t", "PATH": "/usr/bin", "PRICE": "$5"}
    assert config.servers["filesystem"].enabled is False
    assert config.servers["filesystem"].cwd == "/tmp"
    assert config.servers["remote"].kind == "sse"
    assert config.servers["remote"].headers == {"Authorization": "Bearer r", "X-Client": "hub"}
    assert config.servers["streamable"].kind == "auto"  # no type: the hub finds the transport
    assert text.startswith("# servers imported from claude_desktop_config.json\n")


def test_secrets_are_redacted() -> None:
    doc, text = imported(CLAUDE_DESKTOP)
    assert GITHUB_PAT not in text
    assert REMOTE_TOKEN not in text
    assert 'GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_PERSONAL_ACCESS_TOKEN}"' in text
    assert 'Authorization = "Bearer ${REMOTE_AUTHORIZATION}"' in text
    assert "# export GITHUB_PERSONAL_ACCESS_TOKEN before starting the hub" in text
    assert "# export REMOTE_AUTHORIZATION before starting the hub" in text
    assert secret_env_names(doc) == ["GITHUB_PERSONAL_ACCESS_TOKEN", "REMOTE_AUTHORIZATION"]


@pytest.mark.parametrize(
    "key", ["API_KEY", "apiKey", "SLACK_BOT_TOKEN", "CLIENT_SECRET", "DB_PASSWORD", "GITLAB_PAT", "BASIC_AUTH"]
)
def test_secret_looking_env_names_are_redacted(key: str) -> None:
    doc, text = imported(mcp_servers(s={"command": "x", "env": {key: "hunter2-literal"}}))
    assert "hunter2-literal" not in text
    assert secret_env_names(doc) == [key]
    assert round_trip(text, doc).servers["s"].env == {key: "value"}


@pytest.mark.parametrize("key", ["PATH", "PYTHONPATH", "LOG_LEVEL", "DEBUG"])
def test_ordinary_env_values_are_kept(key: str) -> None:
    _, text = imported(mcp_servers(s={"command": "x", "env": {key: "plain"}}))
    assert f'{key} = "plain"' in text


@pytest.mark.parametrize("header", ["X-API-Key", "authorization", "Proxy-Authorization"])
def test_secret_looking_headers_are_redacted(header: str) -> None:
    doc, text = imported(mcp_servers(my_api={"url": "https://e.com/mcp", "headers": {header: "abc-secret"}}))
    assert "abc-secret" not in text
    variable = f"MY_API_{header.upper().replace('-', '_')}"
    assert secret_env_names(doc) == [variable]
    assert round_trip(text, doc).servers["my-api"].headers == {header: "value"}


def test_references_are_not_redacted() -> None:
    doc, text = imported(mcp_servers(s={"command": "x", "env": {"API_KEY": "${MY_KEY}", "EMPTY_TOKEN": ""}}))
    assert 'API_KEY = "${MY_KEY}"' in text
    assert 'EMPTY_TOKEN = ""' in text
    assert secret_env_names(doc) == ["MY_KEY"]


def test_one_variable_per_distinct_secret() -> None:
    doc, text = imported(
        mcp_servers(
            a={"command": "x", "env": {"API_KEY": "first"}},
            b={"command": "x", "env": {"API_KEY": "second"}},
            c={"command": "x", "env": {"API_KEY": "first"}},
        )
    )
    assert "first" not in text
    assert "second" not in text
    assert secret_env_names(doc) == ["API_KEY", "B_API_KEY"]
    environ = {"API_KEY": "1", "B_API_KEY": "2"}
    config = parse_config(text, environ=environ)
    assert [s.env["API_KEY"] for s in config.servers.values()] == ["1", "2", "1"]


def test_dollars_in_literals_survive_the_round_trip() -> None:
    doc, text = imported(mcp_servers(s={"command": "x", "args": ["$5", "a$$b", "${config:x}", "end$"]}))
    assert round_trip(text, doc).servers["s"].args == ("$5", "a$$b", "${config:x}", "end$")


def test_claude_code_references_are_kept() -> None:
    doc, text = imported(mcp_servers(s={"command": "x", "args": ["${DIR}", "${PORT:-8080}"]}))
    assert secret_env_names(doc) == ["DIR"]
    assert parse_config(text, environ={"DIR": "/d"}).servers["s"].args == ("/d", "8080")


def test_disabled_becomes_enabled_false() -> None:
    _, text = imported(mcp_servers(s={"command": "x", "disabled": True}, t={"command": "y", "disabled": False}))
    assert "enabled = false" in text
    assert text.count("enabled") == 1


@pytest.mark.parametrize(
    ("server_type", "transport"), [("sse", "sse"), ("http", "streamable-http"), ("streamable-http", "streamable-http")]
)
def test_remote_types(server_type: str, transport: str | None) -> None:
    doc, text = imported(mcp_servers(s={"type": server_type, "url": "https://e.com/mcp"}))
    assert ("transport" in text) == (transport is not None)
    assert round_trip(text, doc).servers["s"].transport == transport


def test_windsurf_server_url() -> None:
    doc, text = imported(mcp_servers(s={"serverUrl": "https://e.com/mcp"}))
    assert round_trip(text, doc).servers["s"].url == "https://e.com/mcp"


def test_unknown_fields_are_dropped_with_a_comment() -> None:
    _, text = imported(CLAUDE_DESKTOP)
    assert "# dropped unsupported field 'autoApprove'" in text
    assert "read_file" not in text


def test_fields_of_the_other_kind_are_dropped_with_a_comment() -> None:
    doc, text = imported(mcp_servers(s={"url": "https://e.com/mcp", "env": {"A": "b"}, "args": []}))
    assert "# dropped field 'env': it does not apply to a remote server" in text
    assert "'args'" not in text
    round_trip(text, doc)


# -- VS Code -----------------------------------------------------------------------------------


def test_vscode_sample_with_inputs() -> None:
    doc, text = imported(VSCODE, ".vscode/mcp.json")
    assert 'Authorization = "Bearer ${GITHUB_PAT}"' in text
    assert '# export GITHUB_PAT: it stands for VS Code input "github-pat"' in text
    assert 'API_KEY = "${FETCH_KEY}"' in text
    assert '"${HOME}/fetch"' in text
    assert "# dropped unsupported field 'envFile'" in text
    assert secret_env_names(doc) == ["GITHUB_PAT", "HOME", "FETCH_KEY"]
    config = parse_config(text, environ={"GITHUB_PAT": "p", "HOME": "/h", "FETCH_KEY": "k"})
    assert config.servers["github"].headers == {"Authorization": "Bearer p"}
    assert config.servers["github"].kind == "streamable-http"
    assert config.servers["fetch"].args == ("mcp-server-fetch", "--dir", "/h/fetch")
    assert config.servers["fetch"].env == {"API_KEY": "k"}


def test_vscode_settings_json() -> None:
    doc, text = imported({"editor.fontSize": 14, "mcp": {"servers": {"time": {"command": "uvx", "args": ["t"]}}}})
    assert round_trip(text, doc).servers["time"].args == ("t",)


# -- Claude Code, Cursor, FastMCP ---------------------------------------------------------------

CLAUDE_CODE = """{
  "mcpServers": {
    "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"},
    "linear": {"type": "sse", "url": "https://mcp.linear.app/sse"},
    "api": {
      "type": "http",
      "url": "${API_BASE_URL:-https://api.example.com}/mcp",
      "headers": {"Authorization": "Bearer ${API_KEY}"}
    },
    "airtable": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "airtable-mcp-server"],
      "env": {"AIRTABLE_API_KEY": "${AIRTABLE_API_KEY}"}
    }
  }
}"""


def test_claude_code_mcp_json() -> None:
    doc, text = imported(CLAUDE_CODE, ".mcp.json")
    assert secret_env_names(doc) == ["API_KEY", "AIRTABLE_API_KEY"]
    config = parse_config(text, environ={"API_KEY": "k", "AIRTABLE_API_KEY": "a"})
    servers = config.servers
    assert [servers[name].kind for name in servers] == ["streamable-http", "sse", "streamable-http", "stdio"]
    assert servers["api"].url == "https://api.example.com/mcp"
    assert servers["api"].headers == {"Authorization": "Bearer k"}
    assert servers["airtable"].env == {"AIRTABLE_API_KEY": "a"}


def test_cursor_url_without_a_type_is_left_to_the_hub() -> None:
    cursor = {
        "mcpServers": {"remote": {"url": "https://mcp.example.com/sse"}, "local": {"command": "uvx", "args": ["x"]}}
    }
    doc, text = imported(cursor, "~/.cursor/mcp.json")
    assert "transport" not in text
    assert round_trip(text, doc).servers["remote"].kind == "auto"


FASTMCP = json.dumps(
    {
        "mcpServers": {
            "weather": {
                "command": "python",
                "args": ["./weather_server.py"],
                "env": {"LOG_LEVEL": "INFO", "WEATHER_API_KEY": "wk-literal-123"},
                "cwd": "/srv/weather",
                "transport": "stdio",
            },
            "legacy": {"url": "https://legacy.example.com/sse", "transport": "sse"},
            "assistant": {
                "url": "https://assistant.example.com/mcp",
                "transport": "streamable-http",
                "headers": {"X-Team": "infra"},
                "auth": "tok-literal-456",
                "timeout": 30000,
            },
            "calendar": {"url": "https://calendar.example.com/mcp", "transport": "http", "auth": "oauth"},
        }
    }
)


def test_fastmcp_mcp_config_keeps_the_transport() -> None:
    doc, text = imported(FASTMCP, "fastmcp.json")
    assert "wk-literal-123" not in text and "tok-literal-456" not in text
    assert secret_env_names(doc) == ["WEATHER_API_KEY", "ASSISTANT_AUTH"]
    assert "# dropped unsupported field 'timeout'" in text
    assert "# dropped 'auth': the hub does not sign in to servers with OAuth" in text
    config = parse_config(text, environ={"WEATHER_API_KEY": "w", "ASSISTANT_AUTH": "t"})
    servers = config.servers
    assert [servers[name].kind for name in servers] == ["stdio", "sse", "streamable-http", "streamable-http"]
    assert (servers["weather"].cwd, servers["weather"].env["WEATHER_API_KEY"]) == ("/srv/weather", "w")
    assert servers["assistant"].headers == {"X-Team": "infra", "Authorization": "Bearer t"}


@pytest.mark.parametrize(
    ("entry", "key", "fragment"),
    [
        ({"url": "https://e.com/sse", "type": "http", "transport": "sse"}, "mcpServers.s.transport", "disagrees"),
        ({"url": "https://e.com/mcp", "transport": "websocket"}, "mcpServers.s.transport", "must be http or sse"),
        ({"command": "x", "transport": "sse"}, "mcpServers.s.transport", "must be stdio"),
        ({"url": "https://e.com/mcp", "auth": 42}, "mcpServers.s.auth", "must be a string"),
    ],
)
def test_bad_fastmcp_transport(entry: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        imported(mcp_servers(s=entry))
    assert caught.value.key == key and fragment in caught.value.reason


# -- Goose, Continue (YAML) --------------------------------------------------------------------

GOOSE = """\
GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4-5
extensions:
  developer:
    bundled: true
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  filesystem:
    type: stdio
    name: filesystem
    enabled: true
    cmd: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    env_keys: [GITHUB_TOKEN]
    envs: {LOG_LEVEL: debug, SLACK_BOT_TOKEN: xoxb-literal-789}
    timeout: 300
  remote-tools:
    type: streamable_http
    name: remote-tools
    enabled: false
    uri: "https://example.com/mcp"
    headers: {}
    env_keys: []
    envs: {}
    timeout: 300
  old-sse:
    type: sse
    name: old-sse
    enabled: true
    uri: http://localhost:8000/sse
"""


def test_goose_config_yaml() -> None:
    doc, text = imported(GOOSE, "~/.config/goose/config.yaml")
    assert "xoxb-literal-789" not in text
    assert '# skipped "developer": a Goose built-in extension, not an MCP server' in text
    assert "# dropped unsupported field 'timeout'" in text
    assert secret_env_names(doc) == ["GITHUB_TOKEN", "SLACK_BOT_TOKEN"]
    config = parse_config(text, environ={"GITHUB_TOKEN": "g", "SLACK_BOT_TOKEN": "s"})
    servers = config.servers
    assert list(servers) == ["filesystem", "remote-tools", "old-sse"]
    assert servers["filesystem"].command == "npx"
    assert servers["filesystem"].args == ("-y", "@modelcontextprotocol/server-filesystem", "/tmp")
    assert servers["filesystem"].env == {"GITHUB_TOKEN": "g", "LOG_LEVEL": "debug", "SLACK_BOT_TOKEN": "s"}
    assert (servers["remote-tools"].kind, servers["remote-tools"].enabled) == ("streamable-http", False)
    assert (servers["old-sse"].kind, servers["old-sse"].url) == ("sse", "http://localhost:8000/sse")


def test_goose_errors_name_goose_fields() -> None:
    with pytest.raises(ConfigError) as caught:
        imported("extensions:\n  x:\n    type: stdio\n    cmd: [npx]\n", "config.yaml")
    assert (caught.value.key, caught.value.reason) == ("extensions.x.cmd", "must be a string; fix the value")
    with pytest.raises(ConfigError) as caught:
        imported("extensions:\n  x:\n    cmd: npx\n    envs: {A: 1}\n", "config.yaml")
    assert caught.value.key == "extensions.x.envs.A"


CONTINUE = """\
name: My config
version: 0.0.1
schema: v1
mcpServers:
  - name: SQLite MCP
    command: npx
    args:
      - "-y"
      - "mcp-sqlite"
      - "/path/to/your/database.db"
  - name: GitHub
    type: stdio
    command: npx
    args: ["-y", "@modelcontextprotocol/server-github"]
    env:
      GITHUB_PERSONAL_ACCESS_TOKEN: ${{ secrets.GITHUB_PERSONAL_ACCESS_TOKEN }}
  - name: Remote
    type: streamable-http
    url: https://mcp.example.com/mcp
  - name: Old
    type: sse
    url: https://old.example.com/sse
"""


def test_continue_config_yaml() -> None:
    doc, text = imported(CONTINUE, ".continue/config.yaml")
    assert secret_env_names(doc) == ["GITHUB_PERSONAL_ACCESS_TOKEN"]
    assert '# export GITHUB_PERSONAL_ACCESS_TOKEN: it stands for Continue secret "GITHUB_PERSONAL_ACCESS_TOKEN"' in text
    config = parse_config(text, environ={"GITHUB_PERSONAL_ACCESS_TOKEN": "p"})
    servers = config.servers
    assert list(servers) == ["sqlite-mcp", "github", "remote", "old"]
    assert servers["sqlite-mcp"].args == ("-y", "mcp-sqlite", "/path/to/your/database.db")
    assert servers["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "p"}
    assert [servers[name].kind for name in ("remote", "old")] == ["streamable-http", "sse"]
    assert '# imported from "SQLite MCP"' in text


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("mcpServers:\n  - command: npx\n", "mcpServers[0].name", "needs a name"),
        ("mcpServers:\n  - name: a\n    command: [npx]\n", "mcpServers[0].command", "must be a string"),
        ("mcpServers: [\n", "", "invalid YAML at line 2"),
        ("- just\n- a list\n", "", "no MCP servers found"),
    ],
)
def test_bad_yaml(text: str, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        imported(text, "config.yml")
    assert caught.value.key == key and fragment in caught.value.reason


# -- names -------------------------------------------------------------------------------------


def test_names_are_converted_and_deduplicated() -> None:
    servers = {name: {"command": "x"} for name in ["My Server", "my_server", "my-server", "42", "x" * 40, "x" * 41]}
    doc, text = imported({"mcpServers": servers})
    names = list(round_trip(text, doc).servers)
    assert names == ["my-server", "my-server-2", "my-server-3", "s-42", "x" * 32, "x" * 30 + "-2"]
    assert '# imported from "My Server"' in text
    assert '# imported from "my_server"' in text
    assert '# imported from "my-server"' in text  # renamed by dedupe
    assert text.count("# imported from") == 6


def test_unchanged_names_get_no_comment() -> None:
    _, text = imported(mcp_servers(github={"command": "x"}))
    assert 'imported from "' not in text


def test_comment_injection_is_escaped() -> None:
    doc, text = imported({"mcpServers": {'evil"\n[hub]\nname = "pwned': {"command": "x"}}})
    assert round_trip(text, doc).hub.name == "mcp-hub"


@settings(max_examples=50)
@given(st.dictionaries(st.text(max_size=40), st.just({"command": "x"}), max_size=8))
def test_any_names_round_trip(servers: dict) -> None:
    doc, text = imported({"mcpServers": servers})
    config = round_trip(text, doc)
    assert len(config.servers) == len(servers)
    assert all(MOUNT_NAME_PATTERN.match(name) for name in config.servers)


@settings(max_examples=100)
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=6))
def test_any_env_round_trips(env: dict[str, str]) -> None:
    doc, text = imported(mcp_servers(s={"command": "x", "env": env}))
    expanded = round_trip(text, doc).servers["s"].env
    assert expanded.keys() == env.keys()
    for key, value in env.items():
        assert expanded[key] in (value, "value")


# -- errors ------------------------------------------------------------------------------------


def test_invalid_json_reports_line_and_column() -> None:
    with pytest.raises(ConfigError) as caught:
        import_client_config('{\n  "mcpServers": {\n    "a": {"command": }\n  }\n}', "claude.json")
    assert (caught.value.file, caught.value.key) == ("claude.json", "")
    assert "line 3, column 22" in caught.value.reason
    assert "fix the syntax" in caught.value.reason


@pytest.mark.parametrize("data", [{}, [], {"other": 1}, {"mcp": {"x": 1}}])
def test_no_servers_key(data: object) -> None:
    with pytest.raises(ConfigError) as caught:
        import_client_config(json.dumps(data), "c.json")
    assert "c.json" in str(caught.value)
    for expected in ('"mcpServers"', '"servers"', '"mcp": {"servers": ...}'):
        assert expected in caught.value.reason


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"mcpServers": "npx"}, "mcpServers", "must be an object"),
        (mcp_servers(s="npx"), "mcpServers.s", "must be an object"),
        (mcp_servers(s={}), "mcpServers.s", "exactly one of command"),
        (mcp_servers(s={"command": "x", "url": "https://e.com"}), "mcpServers.s", "exactly one of command"),
        (mcp_servers(s={"command": "x", "type": "sse"}), "mcpServers.s.type", "must be stdio"),
        (mcp_servers(s={"url": "https://e.com", "type": "ws"}), "mcpServers.s.type", "must be http or sse"),
        (mcp_servers(s={"command": ["x"]}), "mcpServers.s.command", "must be a string"),
        (mcp_servers(s={"command": "x", "args": "a b"}), "mcpServers.s.args", "must be an array"),
        (mcp_servers(s={"command": "x", "args": [1]}), "mcpServers.s.args[0]", "must be a string"),
        (mcp_servers(s={"command": "x", "env": {"P": 1}}), "mcpServers.s.env.P", "must be a string"),
        (mcp_servers(s={"command": "x", "disabled": "yes"}), "mcpServers.s.disabled", "must be true or false"),
        ({"servers": {"My S": {"command": 1}}}, 'servers."My S".command', "must be a string"),
    ],
)
def test_bad_entries(data: object, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        import_client_config(json.dumps(data), "c.json")
    assert (caught.value.file, caught.value.key) == ("c.json", key)
    assert fragment in caught.value.reason


# -- merge_into --------------------------------------------------------------------------------

EXISTING = """# My hub: keep this comment
[hub]
name = "mine"  # and this one

[servers.local]
command = "cat"   # the local one
"""


def test_merge_preserves_existing_comments_and_round_trips() -> None:
    doc, _ = imported(CLAUDE_DESKTOP)
    merged = merge_into(EXISTING, doc, file="hub.toml")
    assert merged.startswith(EXISTING)
    assert GITHUB_PAT not in merged
    config = round_trip(merged, doc)
    assert list(config.servers) == ["local", "github", "filesystem", "remote", "streamable"]
    assert config.hub.name == "mine"


def test_merge_into_a_file_without_servers() -> None:
    doc, _ = imported(mcp_servers(a={"command": "x"}))
    merged = merge_into('[hub]\nname = "x"\n', doc, file="hub.toml")
    assert list(parse_config(merged, environ={}).servers) == ["a"]


def test_merge_clash_is_an_error() -> None:
    doc, _ = imported(mcp_servers(local={"command": "other"}))
    with pytest.raises(ConfigError) as caught:
        merge_into(EXISTING, doc, file="hub.toml")
    assert (caught.value.file, caught.value.key) == ("hub.toml", "servers.local")
    assert "already exists" in caught.value.reason
    assert "--force" in caught.value.reason


def test_merge_force_replaces() -> None:
    doc, _ = imported(mcp_servers(local={"command": "other"}))
    merged = merge_into(EXISTING, doc, file="hub.toml", force=True)
    assert "# My hub: keep this comment" in merged
    assert parse_config(merged, environ={}).servers["local"].command == "other"


@pytest.mark.parametrize(
    ("existing", "key", "fragment"),
    [("[hub\n", "", "invalid TOML"), ("servers = { a = 1 }\n", "servers", "[servers.NAME]")],
)
def test_merge_into_unusable_file(existing: str, key: str, fragment: str) -> None:
    doc, _ = imported(mcp_servers(a={"command": "x"}))
    with pytest.raises(ConfigError) as caught:
        merge_into(existing, doc, file="hub.toml")
    assert (caught.value.file, caught.value.key) == ("hub.toml", key)
    assert fragment in caught.value.reason


# -- the sandbox each server needs -----------------------------------------------------------------------------


def test_each_server_is_proposed_the_sandbox_its_command_line_asks_for(tmp_path: Path) -> None:
    """Folders its arguments name: written in; a URL, a credential or a known fetching server: the network;
    else nothing (the hub-wide profile, no network)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    _, text = imported(
        mcp_servers(
            files={"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", str(docs)]},
            git={"command": "uvx", "args": ["mcp-server-git", f"--repository={docs}"]},
            fetch={"command": "uvx", "args": ["mcp-server-fetch"]},
            github={"command": "npx", "args": ["-y", "github-mcp"], "env": {"GITHUB_TOKEN": "ghp_x"}},
            db={"command": "npx", "args": ["-y", "pg-mcp", "postgresql://localhost/db"]},
            time={"command": "uvx", "args": ["mcp-server-time"]},
            elsewhere={"command": "npx", "args": ["-y", "x", "/no/such/folder"]},
        )
    )
    config = parse_config(text, environ={"GITHUB_TOKEN": "t"})
    sandboxes = {name: server.sandbox for name, server in config.servers.items()}
    assert sandboxes["files"] is not None and sandboxes["files"].write == (str(docs),)
    assert sandboxes["git"] is not None and sandboxes["git"].write == (str(docs),)
    assert {name: sandboxes[name].profile for name in ("fetch", "github", "db")} == dict.fromkeys(  # type: ignore[union-attr]
        ("fetch", "github", "db"), "network"
    )
    assert sandboxes["time"] is None and sandboxes["elsewhere"] is None  # the hub-wide [sandbox] decides
    assert 'sandbox: the network, as it is given a credential for a service; write sandbox = "standard"' in text
    assert "sandbox: it may write in the folders its arguments name" in text

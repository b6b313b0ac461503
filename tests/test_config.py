"""Tests for mcp_hub.config: the hub.toml model, loader, error messages and ${VAR} expansion."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from mcp_hub.config import (
    MOUNT_NAME_PATTERN,
    HubConfig,
    ServerConfig,
    expand_env,
    load_config,
    parse_config,
    to_mount_name,
    variable_references,
)
from mcp_hub.errors import ConfigError

FULL_EXAMPLE = """
[hub]
name = "my-hub"
page_size = 25
log_level = "debug"

[http]
host = "0.0.0.0"
port = 9000
path = "/gateway/mcp"

[servers.everything]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-everything"]
env = { API_KEY = "${API_KEY}" }
cwd = "/srv"
timeout = 5
connect_timeout = 2.5
protocol = "legacy"

[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }

[servers.old-sse]
url = "http://localhost:3001/sse"
transport = "sse"
protocol = "2026-07-28"

[servers.off]
command = "never-started"
enabled = false
"""
ENV = {"API_KEY": "k-123", "TOKEN": "t-456"}


def parse(text: str, environ: dict[str, str] | None = None) -> HubConfig:
    return parse_config(text, file="hub.toml", environ=environ or {})


def config_error(text: str, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse(text, environ)
    return caught.value


def server(body: str) -> str:
    return f"[servers.s]\n{body}\n"


# -- valid files -------------------------------------------------------------------------------


def test_full_example_loads() -> None:
    config = parse(FULL_EXAMPLE, ENV)
    assert config.hub.model_dump() == {
        "name": "my-hub",
        "description": "One MCP endpoint in front of the MCP servers this hub mounts",
        "page_size": 25,
        "log_level": "debug",
        "access_log": False,
        "startup_grace": 10.0,
        "env_file": None,
        "catalog_snapshot": True,
        "registry": "https://registry.modelcontextprotocol.io",
    }
    assert config.http.model_dump() == {
        "host": "0.0.0.0",
        "port": 9000,
        "path": "/gateway/mcp",
        "max_request_mb": 32,
        "keep_alive": 75,
        "session_idle_timeout": 1800.0,
        "health_stderr": False,
        "server_cards": True,
        "allow_unauthenticated": False,
        "cors_origins": (),
        "forwarded_allow_ips": None,
    }
    assert config.path == "hub.toml"
    everything = config.servers["everything"]
    assert everything.name == "everything"
    assert everything.args == ("-y", "@modelcontextprotocol/server-everything")
    assert everything.env == {"API_KEY": "k-123"}
    assert (everything.cwd, everything.timeout, everything.connect_timeout) == ("/srv", 5.0, 2.5)
    assert everything.protocol == "legacy"
    assert config.servers["remote"].headers == {"Authorization": "Bearer t-456"}
    assert [s.kind for s in config.servers.values()] == ["stdio", "auto", "sse", "stdio"]
    assert list(config.enabled_servers()) == ["everything", "remote", "old-sse"]


def test_defaults() -> None:
    config = parse(server('command = "x"'))
    assert config.hub.model_dump() == {
        "name": "mcp-hub",
        "description": "One MCP endpoint in front of the MCP servers this hub mounts",
        "page_size": 0,
        "log_level": "info",
        "access_log": False,
        "startup_grace": 10.0,
        "env_file": None,
        "catalog_snapshot": True,
        "registry": "https://registry.modelcontextprotocol.io",
    }
    assert config.http.model_dump() == {
        "host": "127.0.0.1",
        "port": 8765,
        "path": "/mcp",
        "max_request_mb": 32,
        "keep_alive": 75,
        "session_idle_timeout": 1800.0,
        "health_stderr": False,
        "server_cards": True,
        "allow_unauthenticated": False,
        "cors_origins": (),
        "forwarded_allow_ips": None,
    }
    s = config.servers["s"]
    assert (s.args, s.env, s.cwd, s.url, s.transport, s.headers) == ((), {}, None, None, None, {})
    assert (s.timeout, s.connect_timeout, s.enabled, s.prefix, s.protocol) == (60.0, 30.0, True, True, "auto")


@pytest.mark.parametrize("text", ["", "[servers]\n"])
def test_no_servers_is_allowed(text: str) -> None:
    assert parse(text).servers == {}


def test_port_zero_means_any_free_port() -> None:
    assert parse("[http]\nport = 0").http.port == 0


@pytest.mark.parametrize(("value", "seconds"), [("1800", 1800.0), ("2.5", 2.5), ("0", None), ("0.0", None)])
def test_session_idle_timeout_is_seconds_and_zero_means_never(value: str, seconds: float | None) -> None:
    """The SDK session manager takes None for sessions that never expire; hub.toml says 0."""
    http = parse(f"[http]\nsession_idle_timeout = {value}").http
    assert http.session_idle_seconds == seconds
    assert parse("").http.session_idle_seconds == 1800.0  # the SDK's own default


def test_secrets_stay_out_of_repr() -> None:
    config = parse(FULL_EXAMPLE, ENV)
    assert "k-123" not in repr(config)
    assert "t-456" not in repr(config)


def test_models_are_frozen() -> None:
    config = parse(server('command = "x"'))
    with pytest.raises(ValidationError):
        config.servers["s"].timeout = 1  # type: ignore[misc]


def test_server_config_can_be_built_directly() -> None:
    assert ServerConfig(name="x", url="https://e.com/mcp", transport="sse").kind == "sse"
    assert ServerConfig(name="x", url="https://e.com/mcp", transport="http").kind == "streamable-http"
    assert ServerConfig(name="x", url="https://e.com/mcp", transport="auto").kind == "auto"
    assert ServerConfig(name="x", url="https://e.com/mcp").kind == "auto"
    assert ServerConfig(name="x", command="cat", args=["-"]).args == ("-",)  # type: ignore[arg-type]


def test_load_config_reads_the_file(tmp_path) -> None:
    path = tmp_path / "hub.toml"
    path.write_text(FULL_EXAMPLE, encoding="utf-8")
    config = load_config(path, environ=ENV)
    assert config.path == str(path)
    assert config.servers["remote"].url == "https://example.com/mcp"


def test_environ_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_HUB_TEST_TOKEN", "from-os")
    config = parse_config(server('command = "x"\nenv = { T = "${MCP_HUB_TEST_TOKEN}" }'))
    assert config.servers["s"].env == {"T": "from-os"}


# -- every error names the file, the dotted key and a fix --------------------------------------

ERRORS = [
    # (text, key, fragments of the reason)
    ("[hub]\nnmae = 'x'", "hub.nmae", ["unknown key 'nmae'", "did you mean 'name'?"]),
    ("[http]\nprot = 1", "http.prot", ["did you mean 'port'?"]),
    ("[servers.gh]\ncomand = 'npx'", "servers.gh.comand", ["unknown key 'comand'; did you mean 'command'?"]),
    ("[servers.gh]\ncommand = 'x'\nzzz = 1", "servers.gh.zzz", ["unknown key 'zzz'", "remove it", "command, args"]),
    ("[servers.gh]\ncommand = 'x'\nname = 'y'", "servers.gh.name", ["unknown key 'name'"]),
    ("[hubb]\nname = 'x'", "hubb", ["did you mean 'hub'?"]),
    ("paths = 'x'", "paths", ["did you mean 'auth'?"]),
    ("zzz = 'x'", "zzz", ["allowed keys: hub, http, servers, policy, audit, auth"]),
    ("[hub]\npage_size = -1", "hub.page_size", ["greater than or equal to 0", "got -1"]),
    ("[hub]\npage_size = '10'", "hub.page_size", ["valid integer", "remove the quotes"]),
    ("[hub]\npage_size = 1.5", "hub.page_size", ["valid integer", "got 1.5"]),
    ("[hub]\nlog_level = 'verbose'", "hub.log_level", ["'debug', 'info', 'warning' or 'error'"]),
    ("[hub]\nname = 3", "hub.name", ["valid string", "put it in quotes"]),
    ("[hub]\nregistry = 'registry.example.com'", "hub.registry", ["a registry's base URL (http or https)"]),
    ("[hub]\ncatalog_snapshot = 3", "hub.catalog_snapshot", ["true (a file in the user's state folder", "got 3"]),
    ("[hub]\ncatalog_snapshot = ''", "hub.catalog_snapshot", ["false (no snapshot)", "got an empty string"]),
    ("[hub]\nstartup_grace = -1", "hub.startup_grace", ["greater than or equal to 0"]),
    ("[hub]\ncatalog_snapshot = 'state/'", "hub.catalog_snapshot", ["names a folder", '"state/catalog.json"']),
    ("[hub]\ncatalog_snapshot = '.'", "hub.catalog_snapshot", ["names a folder", '"./catalog.json"']),
    ("[hub]\ncatalog_snapsht = 'c.json'", "hub.catalog_snapsht", ["did you mean 'catalog_snapshot'?"]),
    (
        "[hub]\ncatalog_snapshot = 'pins.json'\n[policy]\npins = 'pins.json'",
        "hub.catalog_snapshot",
        ["is [policy] pins, which the snapshot would overwrite", "name a file of its own"],
    ),
    (
        "[hub]\ncatalog_snapshot = 'logs/../audit.jsonl'\n[audit]\nfile = 'audit.jsonl'",
        "hub.catalog_snapshot",
        ["is [audit] file"],
    ),
    ("[http]\nport = 70000", "http.port", ["less than or equal to 65535", "got 70000"]),
    ("[http]\nport = -1", "http.port", ["greater than or equal to 0"]),
    ("[http]\npath = 'mcp'", "http.path", ['must start with "/"', 'write "/mcp"']),
    ("[http]\nsession_idle_timeout = -1", "http.session_idle_timeout", ["got -1", "or 0 to keep sessions"]),
    ("[http]\nsession_idle_timeout = inf", "http.session_idle_timeout", ["got inf", "or 0 to keep sessions"]),
    ("[http]\nsession_idle_timeout = nan", "http.session_idle_timeout", ["got nan", "or 0 to keep sessions"]),
    ("[http]\nsession_idle_timeout = '60'", "http.session_idle_timeout", ["valid number", "remove the quotes"]),
    ("[http]\nsession_idle_timeot = 60", "http.session_idle_timeot", ["did you mean 'session_idle_timeout'?"]),
    ("hub = 3", "hub", ["must be a table", "[section]"]),
    ("[servers]\ngh = 'npx'", "servers.gh", ["must be a table"]),
    (server("command = 'x'\ntimeout = 0"), "servers.s.timeout", ["greater than 0"]),
    (server("command = 'x'\nconnect_timeout = -1"), "servers.s.connect_timeout", ["greater than 0"]),
    (server("command = 'x'\nenabled = 'yes'"), "servers.s.enabled", ["valid boolean", "remove the quotes"]),
    (server("command = 'x'\nargs = 'a b'"), "servers.s.args", ["must be an array"]),
    (server("command = 'x'\nargs = ['a', 2]"), "servers.s.args[1]", ["valid string", "put it in quotes"]),
    (server("command = 'x'\nenv = { PORT = 80 }"), "servers.s.env.PORT", ["valid string"]),
    (server("command = ''"), "servers.s.command", ["at least 1 character"]),
    (server("command = 'x'\nprotocol = '2025'"), "servers.s.protocol", ["'auto', 'legacy' or '2026-07-28'"]),
    (
        server("url = 'https://e.com'\ntransport = 'ws'"),
        "servers.s.transport",
        ["'auto', 'streamable-http', 'http' or 'sse'"],
    ),
    ("[servers.GitHub]\ncommand = 'x'", "servers.GitHub", ["lowercase letter", "[servers.github]"]),
    ("[servers.my_server]\ncommand = 'x'", "servers.my_server", ["[servers.my-server]"]),
    ("[servers.1st]\ncommand = 'x'", "servers.1st", ["[servers.s-1st]"]),
    ("[servers.\"my server\"]\ncommand = 'x'", 'servers."my server"', ["[servers.my-server]"]),
    (f"[servers.{'a' * 33}]\ncommand = 'x'", f"servers.{'a' * 33}", ["at most 32", f"[servers.{'a' * 32}]"]),
    (server(""), "servers.s", ["missing command or url", 'add command = "..."']),
    (server("command = 'x'\nurl = 'https://e.com'"), "servers.s", ["both set", "keep command"]),
    (server("url = 'https://e.com'\nargs = []"), "servers.s.args", ["only applies to a local process", "remove it"]),
    (server("url = 'https://e.com'\nenv = {}"), "servers.s.env", ["only applies to a local process"]),
    (server("url = 'https://e.com'\ncwd = '/'"), "servers.s.cwd", ["only applies to a local process"]),
    (server("command = 'x'\ntransport = 'sse'"), "servers.s.transport", ["only applies to a remote server"]),
    (server("command = 'x'\nheaders = {}"), "servers.s.headers", ["only applies to a remote server"]),
    (server("url = 'ftp://e.com/mcp'"), "servers.s.url", ["http:// or https://", "fix the address"]),
    (server("url = 'example.com/mcp'"), "servers.s.url", ["http:// or https://"]),
    (server("url = 'https://'"), "servers.s.url", ["http:// or https://"]),
    ("[guardrails]\nregions = ['UK']", "guardrails.regions[0]", ["'UK' is not a region", 'write "GB"']),
    ("[guardrails]\nregions = ['US', 'XX']", "guardrails.regions[1]", ["'XX'", "two-letter ISO 3166", '"US"']),
    ("[guardrails]\nregions = 'US'", "guardrails.regions", ["must be an array"]),
    ("[guardrails]\nregion = ['US']", "guardrails.region", ["did you mean 'regions'?"]),
]


@pytest.mark.parametrize(("text", "key", "fragments"), ERRORS)
def test_error_names_file_key_and_fix(text: str, key: str, fragments: list[str]) -> None:
    error = config_error(text)
    assert (error.file, error.key) == ("hub.toml", key)
    assert str(error).startswith(f"hub.toml: {key}: ")
    for fragment in fragments:
        assert fragment in error.reason
    assert ";" in error.reason  # what is wrong; how to fix it


def test_a_typo_in_any_nested_table_gets_a_suggestion_and_a_missing_key_is_named_as_missing() -> None:
    """Every table of the file, however deep (`[admin.oidc]`, `[[audit.sinks]]`), words an unknown key as the
    top-level tables do, and a required key that is absent is said to be missing, not of a wrong type."""
    text = (
        '[[audit.sinks]]\ndestination = "syslog"\naddress = "127.0.0.1:514"\nfacilty = "local0"\n'
        '[admin]\nkeys = { root = "' + "k" * 32 + '" }\n'
        '[admin.oidc]\nissuer = "https://idp.example"\nclient_idd = "c"\nadmin_claim = "groups"\n'
        'admin_values = ["ops"]\n'
    )
    error = config_error(text)
    reasons = {problem.key: problem.reason for problem in error.problems}
    assert reasons["audit.sinks[0].facilty"] == "unknown key 'facilty'; did you mean 'facility'?"
    assert reasons["admin.oidc.client_idd"] == "unknown key 'client_idd'; did you mean 'client_id'?"
    assert reasons["admin.oidc.client_id"] == "missing: its table needs client_id = ..."
    assert len(reasons) == 3, reasons


def test_missing_file(tmp_path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (caught.value.file, caught.value.key) == (str(path), "")
    assert caught.value.reason == "file not found; create it (`mcp-hub init` writes one), or pass --config PATH"
    assert str(caught.value).startswith(str(path))


def test_unreadable_file(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        load_config(tmp_path)


def test_toml_syntax_error_has_line_and_column() -> None:
    error = config_error('[hub]\nname = "x"\npage_size = = 3\n')
    assert (error.file, error.key) == ("hub.toml", "")
    assert "line 3, column" in error.reason
    assert "fix the syntax" in error.reason


def test_string_values_never_appear_in_type_errors() -> None:
    error = config_error(server("command = 'x'\nenabled = 'sk-secret'"))
    assert "sk-secret" not in str(error)


# -- prefix = false ----------------------------------------------------------------------------


def test_prefix_false_with_other_enabled_servers_is_an_error() -> None:
    error = config_error(server("command = 'x'\nprefix = false") + "[servers.other]\ncommand = 'y'\n")
    assert error.key == "servers.s.prefix"
    assert "only enabled server" in error.reason
    assert "collide" in error.reason
    assert "other" in error.reason
    assert "remove 'prefix = false'" in error.reason


def test_prefix_false_alone_is_allowed() -> None:
    assert parse(server("command = 'x'\nprefix = false")).servers["s"].prefix is False


def test_prefix_false_with_only_disabled_others_is_allowed() -> None:
    text = server("command = 'x'\nprefix = false") + "[servers.other]\ncommand = 'y'\nenabled = false\n"
    assert parse(text).servers["s"].prefix is False


# -- ${VAR} expansion --------------------------------------------------------------------------

STDIO_ALL = server(
    'command = "${BIN}"\nargs = ["--dir", "${DIR}"]\nenv = { T = "${TOKEN}" }\ncwd = "${DIR}"',
)
REMOTE_ALL = server('url = "https://${HOST}/mcp"\nheaders = { Authorization = "Bearer ${TOKEN}" }')


def test_expansion_in_every_stdio_field() -> None:
    s = parse(STDIO_ALL, {"BIN": "node", "DIR": "/work", "TOKEN": "t"}).servers["s"]
    assert (s.command, s.args, s.env, s.cwd) == ("node", ("--dir", "/work"), {"T": "t"}, "/work")


def test_expansion_in_url_and_headers() -> None:
    s = parse(REMOTE_ALL, {"HOST": "e.com", "TOKEN": "t"}).servers["s"]
    assert (s.url, s.headers) == ("https://e.com/mcp", {"Authorization": "Bearer t"})


@pytest.mark.parametrize(
    ("text", "environ", "key", "variable"),
    [
        (STDIO_ALL, {"DIR": "/", "TOKEN": "t"}, "servers.s.command", "BIN"),
        (STDIO_ALL, {"BIN": "b", "TOKEN": "t"}, "servers.s.args[1]", "DIR"),
        (STDIO_ALL, {"BIN": "b", "DIR": "/"}, "servers.s.env.T", "TOKEN"),
        (REMOTE_ALL, {"TOKEN": "t"}, "servers.s.url", "HOST"),
        (REMOTE_ALL, {"HOST": "e.com"}, "servers.s.headers.Authorization", "TOKEN"),
        (server('command = "x"\nenv = { "A.B" = "${V}" }'), {}, 'servers.s.env."A.B"', "V"),
    ],
)
def test_missing_variable(text: str, environ: dict[str, str], key: str, variable: str) -> None:
    """A variable a server's table needs disables that server, with a reason naming the variable, the server,
    the key and how to set it; the file still loads."""
    s = parse(text, environ).servers["s"]
    assert not s.enabled
    assert s.unusable == (
        f"hub.toml: {key}: environment variable {variable} is not set; export it, set it in a dotenv file named "
        f"by [hub] env_file, or write ${{{variable}:-default}}; server 's' is disabled until it is set"
    )


def test_cwd_missing_variable_names_cwd() -> None:
    s = parse(server('command = "x"\ncwd = "${NOPE}"')).servers["s"]
    assert s.unusable is not None and s.unusable.startswith("hub.toml: servers.s.cwd: ")


def test_a_missing_variable_disables_only_its_server() -> None:
    text = '[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "${NOPE}"\n'
    config = parse(text, {})
    assert list(config.enabled_servers()) == ["a"]
    assert config.servers["a"].unusable is None and config.servers["b"].unusable is not None


def test_unusable_is_not_a_key_of_hub_toml() -> None:
    error = config_error(server('command = "x"\nunusable = "no"'))
    assert (error.key, error.reason.split(";")[0]) == ("servers.s.unusable", "unknown key 'unusable'")


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ('[auth]\napi_keys = { a = "${NOPE}" }', "auth.api_keys.a"),
        ('[admin]\nenabled = true\nkeys = { a = "${NOPE}" }', "admin.keys.a"),
        ('[cluster]\nredis = "${NOPE}"', "cluster.redis"),
    ],
)
def test_a_missing_variable_in_hub_wide_security_settings_stops_the_hub(section: str, key: str) -> None:
    error = config_error(section + '\n[servers.a]\ncommand = "a"\n', {})
    assert error.key == key and "NOPE is not set" in error.reason


def test_every_missing_hub_wide_variable_is_reported_at_once() -> None:
    error = config_error('[auth]\napi_keys = { a = "${ONE}" }\n[admin]\nenabled = true\nkeys = { b = "${TWO}" }\n', {})
    assert [problem.key for problem in error.problems] == ["auth.api_keys.a", "admin.keys.b"]


# -- env_file ----------------------------------------------------------------------------------


def test_env_file_gives_variables_and_the_environment_wins(tmp_path: Path) -> None:
    (tmp_path / "secrets.env").write_text("TOKEN=from-file\nBOTH='file'\n# a comment\nexport QUOTED=\"a b\"\n")
    (tmp_path / "hub.toml").write_text(
        '[hub]\nenv_file = "secrets.env"\n[servers.s]\ncommand = "x"\nargs = ["${TOKEN}", "${BOTH}", "${QUOTED}"]\n'
    )
    config = load_config(tmp_path / "hub.toml", {"BOTH": "environment"})
    assert config.servers["s"].args == ("from-file", "environment", "a b")


def test_a_variable_in_neither_names_the_env_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("OTHER=1\n")
    (tmp_path / "hub.toml").write_text('[hub]\nenv_file = ".env"\n[servers.s]\ncommand = "${NOPE}"\n')
    unusable = load_config(tmp_path / "hub.toml", {}).servers["s"].unusable
    assert unusable is not None and f"add NOPE=... to {tmp_path / '.env'}" in unusable


def test_a_missing_env_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "hub.toml").write_text('[hub]\nenv_file = "nope.env"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "hub.toml", {})
    assert caught.value.key == "hub.env_file" and "is not a file" in caught.value.reason


# -- every problem at once ---------------------------------------------------------------------


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    text = '[http]\nport = "x"\nfoo = 1\n[hub]\nlog_level = 3\n[servers.a]\ncommand = 1\n'
    error = config_error(text)
    assert [problem.key for problem in error.problems] == [
        "http.foo",
        "hub.log_level",
        "http.port",
        "servers.a.command",
    ]
    lines = str(error).splitlines()
    assert lines[0] == "hub.toml: 4 problems; fix each:"
    assert lines[1:] == [f"  {problem}" for problem in error.problems]
    assert all(line.startswith("  hub.toml: ") for line in lines[1:])


def test_one_problem_keeps_its_one_line() -> None:
    error = config_error('[http]\nport = "x"\n')
    assert str(error) == "hub.toml: http.port: must be a valid integer, got a string; remove the quotes"
    assert error.problems == [error]


def test_default_is_used_when_unset_or_empty() -> None:
    text = server('command = "x"\nargs = ["${A:-one}", "${B:-two}", "${C:-}"]')
    assert parse(text, {"B": ""}).servers["s"].args == ("one", "two", "")
    assert parse(text, {"A": "set"}).servers["s"].args == ("set", "two", "")


def test_set_but_empty_variable_without_default_is_empty() -> None:
    assert parse(server('command = "x"\nargs = ["${E}"]'), {"E": ""}).servers["s"].args == ("",)


def test_double_dollar_is_a_literal_dollar() -> None:
    text = server('command = "x"\nargs = ["$${HOME}", "a$$b", "$5", "end$"]')
    assert parse(text, {"HOME": "/h"}).servers["s"].args == ("${HOME}", "a$b", "$5", "end$")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("${UNCLOSED", "unclosed '${'"),
        ("${}", "invalid variable reference '${}'"),
        ("${1ABC}", "invalid variable reference"),
        ("${A-B}", "invalid variable reference"),
        ("${A:-$B}", "a default cannot contain '$'"),
    ],
)
def test_malformed_reference(value: str, fragment: str) -> None:
    error = config_error(server(f'command = "x"\nargs = ["{value}"]'))
    assert error.key == "servers.s.args[0]"
    assert fragment in error.reason
    assert "$$ for a literal '$'" in error.reason


def test_url_from_a_variable_is_checked_after_expansion() -> None:
    text = server('url = "${URL}"')
    assert parse(text, {"URL": "https://e.com/mcp"}).servers["s"].url == "https://e.com/mcp"
    error = config_error(text, {"URL": "file:///etc/passwd"})
    assert error.key == "servers.s.url"
    assert "http:// or https://" in error.reason


def test_structural_errors_come_before_expansion() -> None:
    error = config_error(server('command = "${MISSING}"\ntimeout = 0'))
    assert error.key == "servers.s.timeout"


def test_disabled_servers_are_not_expanded() -> None:
    s = parse(server('command = "${MISSING}"\nenabled = false')).servers["s"]
    assert s.command == "${MISSING}"


def test_expand_env_directly() -> None:
    assert expand_env("${A}-${B:-b}-$$", {"A": "a"}, file="f", key="k") == "a-b-$"
    with pytest.raises(ConfigError) as caught:
        expand_env("${A}", {}, file="f.toml", key="servers.x.url")
    assert str(caught.value).startswith("f.toml: servers.x.url: environment variable A is not set")


def test_variable_references() -> None:
    assert variable_references("$${X} ${A} ${B:-d} ${bad-name} ${") == [("A", None), ("B", "d")]


# -- mount names -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "github", "my-server-2", "a" * 32, "x-"])
def test_valid_mount_names(name: str) -> None:
    assert MOUNT_NAME_PATTERN.match(name)
    assert name in parse(f"[servers.{name}]\ncommand = 'x'").servers


@pytest.mark.parametrize("name", ["", "A", "1a", "-a", "a_b", "a.b", "a" * 33, "a\n", "ü"])
def test_invalid_mount_names(name: str) -> None:
    assert not MOUNT_NAME_PATTERN.match(name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("GitHub", "github"),
        ("My Server!!", "my-server"),
        ("a__b..c", "a-b-c"),
        ("--x--", "x"),
        ("123", "s-123"),
        ("!!!", "s"),
        ("é-café", "caf"),
        ("a" * 40, "a" * 32),
        ("a" * 31 + "_b", "a" * 31),
    ],
)
def test_to_mount_name(name: str, expected: str) -> None:
    assert to_mount_name(name) == expected


@given(st.text(max_size=60))
def test_to_mount_name_is_always_valid(name: str) -> None:
    assert MOUNT_NAME_PATTERN.match(to_mount_name(name))


# -- [guardrails] ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "regions"),
    [
        ({"LANG": "en_US.UTF-8"}, ("US",)),
        ({"LANG": "de_DE@euro"}, ("DE",)),
        ({"LANG": "en_US.UTF-8", "LC_TELEPHONE": "en_GB.UTF-8"}, ("GB",)),
        ({"LANG": "en_US.UTF-8", "LC_TELEPHONE": "en_GB.UTF-8", "LC_ALL": "fr_FR.UTF-8"}, ("FR",)),
        ({"LANG": "C.UTF-8"}, ()),
        ({"LANG": "POSIX", "LC_ALL": ""}, ()),
        ({}, ()),
    ],
)
def test_phone_regions_default_to_the_locale_country(environ: dict[str, str], regions: tuple[str, ...]) -> None:
    config = parse("")
    assert config.guardrails.regions is None
    assert config.guardrails.phone_regions(environ) == regions


def test_phone_regions_as_written_win_over_the_locale() -> None:
    config = parse("[guardrails]\nregions = ['us', 'GB', 'DE', 'US']")
    assert config.guardrails.regions == ("US", "GB", "DE")
    assert config.guardrails.phone_regions({"LANG": "fr_FR.UTF-8"}) == ("US", "GB", "DE")
    assert parse("[guardrails]\nregions = []").guardrails.phone_regions({"LANG": "fr_FR.UTF-8"}) == ()


def test_a_change_of_phone_regions_is_read_at_start_up_as_the_other_tables_outside_servers() -> None:
    from mcp_hub import live

    old, new = parse("[guardrails]\nregions = ['US']"), parse("[guardrails]\nregions = ['US', 'GB']")
    assert live.diff(old, new).read_once == ("guardrails.regions",)  # logged: restart the hub to apply it

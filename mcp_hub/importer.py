"""Migrate MCP client configs into hub.toml.

Understands, in JSON (comments and trailing commas, as VS Code allows, are fine):
- `{"mcpServers": {...}}`: Claude Desktop, Claude Code's `.mcp.json` (`type`: stdio, sse, http),
  Cursor, Windsurf (`serverUrl`), and FastMCP's MCPConfig (`transport`: stdio, http,
  streamable-http, sse; `auth`: a bearer token);
- VS Code's `mcp.json` (`{"servers": {...}, "inputs": [...]}`) and `settings.json`
  (`{"mcp": {"servers": {...}}}`);
and, in YAML (a file named *.yaml or *.yml):
- Goose's `config.yaml` (`extensions:`, each with `type` stdio, streamable_http or sse, `cmd`,
  `args`, `envs`, `env_keys`, `uri`, `headers`, `enabled`); its built-in extensions run inside
  Goose and are skipped;
- Continue's `config.yaml` and block files (`mcpServers:`, a list of servers with `name`).

A remote server's transport is written when the file names it; without one the hub finds it
(streamable HTTP, or legacy SSE if refused).

The output never contains a literal secret: env values and headers whose names look secret
become `${VARIABLE}` references, with a comment telling the user what to export.
`${input:ID}` / `${env:NAME}` (VS Code) and `${{ secrets.NAME }}` / `${{ inputs.NAME }}`
(Continue) become `${ID}` / `${NAME}`; `${NAME}` and `${NAME:-default}` (Claude Code's syntax,
and the hub's) stay; every other `$` is escaped as `$$`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.items import InlineTable, Table

from mcp_hub.config import dotted_key, to_mount_name, variable_references
from mcp_hub.defaults import write_policies
from mcp_hub.errors import ConfigError

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|AUTH|PAT(?!H)", re.IGNORECASE)
_AUTH_SCHEME = re.compile(r"(?:Bearer|Basic|Token)\s+(?=\S)", re.IGNORECASE)
_CLIENT_VARIABLE = re.compile(
    r"\$\{(?P<kind>input|env):(?P<ref>[^}]*)\}"
    r"|\$\{\{\s*(?P<continue>secrets|inputs)\.(?P<name>[^}\s]+)\s*\}\}"
    r"|(?P<plain>\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^$}]*)?\})|\$"
)
_JSON_STRING = r'"(?:[^"\\\n]|\\.)*"'
_JSON_COMMENT = re.compile(rf"{_JSON_STRING}|//[^\n]*|/\*.*?\*/", re.DOTALL)
_JSON_TRAILING_COMMA = re.compile(rf"{_JSON_STRING}|,(?=\s*[}}\]])")

_TYPES = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "streamable_http": "streamable-http",  # Goose
    "sse": "sse",
}
_STDIO_FIELDS = frozenset(("command", "args", "env", "cwd"))
_REMOTE_FIELDS = frozenset(("url", "serverUrl", "headers", "auth"))  # serverUrl: Windsurf; auth: FastMCP
_KIND_FIELDS = _STDIO_FIELDS | _REMOTE_FIELDS
_KNOWN_FIELDS = _KIND_FIELDS | {"type", "transport", "disabled"}

_GOOSE_FIELDS = {"cmd": "command", "envs": "env", "uri": "url"}
"""Goose's names for the fields the others call command, env and url."""
_GOOSE_BUILT_IN = frozenset(("builtin", "platform", "frontend", "inline_python"))
"""Goose extension types that run inside Goose, not as an MCP server the hub could reach."""


@dataclass
class _Import:
    """State of one import: the file, and which variable stands for which secret."""

    file: str
    secrets: dict[str, str] = field(default_factory=dict)

    def secret_variable(self, preferred: str, fallback: str, secret: str) -> str:
        """A variable for `secret`: `preferred`, unless it already stands for another value."""
        candidates = itertools.chain((preferred, fallback), (f"{fallback}_{n}" for n in itertools.count(2)))
        return next(name for name in candidates if self.secrets.setdefault(name, secret) == secret)


@dataclass
class _Server:
    """One server being converted: its mount name, JSON location and comments for the table."""

    name: str
    key: str
    notes: list[str] = field(default_factory=list)
    spelled: dict[str, str] = field(default_factory=dict)
    """The file's own names of fields it spells differently (Goose's `cmd` for `command`)."""

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def where(self, name: str) -> str:
        """The dotted key of field `name` (or `name.sub`, `name[0]`) as the file spells it."""
        head = re.match(r"[^.\[]*", name)
        assert head is not None
        return f"{self.key}.{self.spelled.get(head[0], head[0])}{name[head.end() :]}"


def import_client_config(text: str, file: str, secrets: dict[str, str] | None = None) -> tomlkit.TOMLDocument:
    """The servers of a client's config (`text`, read from `file`) as a hub.toml document. `secrets`: which
    variable stands for which secret value, shared by the imports that go into one hub.toml (filled here)."""
    data = _load_yaml(text, file) if file.lower().endswith((".yaml", ".yml")) else _load_json(text, file)
    where, entries = _find_servers(data, file)
    state = _Import(file, {} if secrets is None else secrets)
    servers = tomlkit.table(is_super_table=True)
    skipped: list[str] = []
    for key, (original, entry) in entries.items():
        at = dotted_key(where) + key if key.startswith("[") else dotted_key((*where, key))
        server = _Server(_unique_name(original, servers), at)
        if server.name != original:
            server.note(f'imported from "{_shown(original)}"')
        if where == ("extensions",):
            entry = _from_goose(entry, server, state)
            if entry is None:
                skipped.append(original)
                continue
        values = _convert(entry, server, state)
        servers.add(server.name, _table(server.notes, values))
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"servers imported from {_shown(file)}"))
    for original in skipped:
        doc.add(tomlkit.comment(f'skipped "{_shown(original)}": a Goose built-in extension, not an MCP server'))
    doc.add("servers", servers)
    return doc


NEW_CONFIG = """\
# mcp-hub configuration (see the README, "Configuration"). Each server is mounted under its name:
# its tools appear as NAME_tool. Try `mcp-hub check --connect` and `mcp-hub tools`.

# Who may see and call what: the policies in ./policies, written beside this file (README, "Policy").
# As written, the local user (stdio) and HTTP clients on this machine may call every tool, destructive
# ones after a confirmation, and secrets in results are redacted before they reach the model.
[policy]
dir = "policies"
# Every tool's definition is pinned when first seen: a tool that changes later, or that carries hidden
# text or instructions to the model (tool poisoning), is held until accepted (`mcp-hub pins`).
pins = true

# Every decision as a JSON line, in a file of this hub.toml's own in the user's state folder.
[audit]
file = true

# Every stdio server runs in a sandbox (Linux, with bubblewrap): the system read-only, an empty private home
# and /tmp, no network, at most 1 GiB of memory and 256 processes (README, "Sandbox"). The servers below
# say what more they need: sandbox = "network", or the folders they may write. Where bubblewrap is not
# installed, servers run unconfined and `mcp-hub check` says so.
[sandbox]
profile = "standard"

"""
"""The start of a hub.toml that `mcp-hub import` creates: the protections a new user gets, before the servers."""


def new_config(imported: tomlkit.TOMLDocument) -> str:
    """The text of a new hub.toml: `NEW_CONFIG`, then the imported servers."""
    return NEW_CONFIG + imported.as_string()


def create_config(output: Path, servers: tomlkit.TOMLDocument) -> Path | None:
    """Write a new hub.toml at `output` (`new_config(servers)`: the protections, then the servers), and the
    shipped policies into `policies/` beside it, which its `[policy] dir` names, unless that folder exists
    (its files are then kept as they are). The policy folder written, or None."""
    policies = output.parent / "policies"
    written = write_policies(policies)
    output.write_text(new_config(servers), encoding="utf-8")
    return policies if written else None


def merge_into(existing: str, imported: tomlkit.TOMLDocument, *, file: str, force: bool = False) -> str:
    """`existing` hub.toml text plus the imported [servers.*] tables, comments and layout kept.

    A server name already in `existing` is a ConfigError, unless `force` (then it is replaced).
    """
    try:
        doc = tomlkit.parse(existing)
    except ParseError as exc:
        raise ConfigError(file, "", f"invalid TOML: {exc}; fix the syntax there") from None
    if "servers" not in doc:
        doc.add("servers", tomlkit.table(is_super_table=True))
    servers = doc["servers"]
    if not isinstance(servers, dict) or isinstance(servers, InlineTable):
        raise ConfigError(file, "servers", "is not a table; write each server as a [servers.NAME] table")
    for name, table in imported.get("servers", {}).items():
        if name in servers and not force:
            raise ConfigError(
                file,
                dotted_key(("servers", name)),
                f"a server named {name!r} already exists; rename or remove it, or use --force to replace it",
            )
        servers[name] = table
    return doc.as_string()


def secret_env_names(doc: tomlkit.TOMLDocument) -> list[str]:
    """The variables `doc` references without a default, in order: the user must export them."""
    names = (name for text in _strings(doc.unwrap()) for name, default in variable_references(text) if default is None)
    return list(dict.fromkeys(names))


class NoServers(ConfigError):
    """The file holds no table of MCP servers where any client keeps one."""


def combined(documents: list[tomlkit.TOMLDocument]) -> tuple[tomlkit.TOMLDocument, list[str]]:
    """The servers of several imports as one hub.toml document, each file's comments before its servers; a
    name the files before already gave is left out. The document, and the names left out (in the order met)."""
    text, seen, left_out = "", set[str](), []
    for document in documents:
        servers = document.get("servers", {})
        for name in [name for name in servers if name in seen]:
            left_out.append(name)
            del servers[name]
        seen.update(servers)
        text += document.as_string()
    return tomlkit.parse(text), left_out


# -- reading the JSON --------------------------------------------------------------------------


def _load_json(text: str, file: str) -> Any:
    """Parse JSON, allowing comments and trailing commas (blanked out, so positions hold)."""
    uncommented = _JSON_COMMENT.sub(lambda m: _blank(m[0]) if m[0][0] == "/" else m[0], text)
    strict = _JSON_TRAILING_COMMA.sub(lambda m: " " if m[0] == "," else m[0], uncommented)
    try:
        return json.loads(strict)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; fix the syntax there"
        raise ConfigError(file, "", reason) from None


def _load_yaml(text: str, file: str) -> Any:
    """Parse YAML (Goose, Continue) as plain data: no tags that build objects."""
    import yaml  # only for a YAML file

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise ConfigError(file, "", f"invalid YAML{at}: {problem}; fix the syntax there") from None


def _blank(comment: str) -> str:
    return re.sub(r"[^\n]", " ", comment)


def _find_servers(data: Any, file: str) -> tuple[tuple[str, ...], dict[str, tuple[str, Any]]]:
    """Where the servers are, and each server by its key there: (its name, its entry)."""
    if isinstance(data, dict):
        mcp = data.get("mcp")
        candidates = {
            ("mcpServers",): data.get("mcpServers"),
            ("servers",): data.get("servers"),
            ("mcp", "servers"): mcp.get("servers") if isinstance(mcp, dict) else None,
            ("extensions",): data.get("extensions"),
        }
        for where, servers in candidates.items():
            if isinstance(servers, dict):
                return where, {str(name): (str(name), entry) for name, entry in servers.items()}
            if where == ("mcpServers",) and isinstance(servers, list):
                return where, _listed_servers(servers, file)
            if servers is not None:
                raise ConfigError(file, dotted_key(where), "must be an object mapping server names to their settings")
    raise NoServers(
        file,
        "",
        'no MCP servers found; expected a top-level "mcpServers" object (Claude Desktop, Claude Code, Cursor, '
        'Windsurf, FastMCP) or list (Continue), "servers" (VS Code mcp.json), "mcp": {"servers": ...} '
        '(VS Code settings.json) or "extensions" (Goose)',
    )


def _listed_servers(servers: list[Any], file: str) -> dict[str, tuple[str, Any]]:
    """Continue's list of servers, each named by its `name`, by index."""
    listed: dict[str, tuple[str, Any]] = {}
    for index, entry in enumerate(servers):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(file, f"mcpServers[{index}].name", "each server in the list needs a name; add one")
        listed[f"[{index}]"] = (name, {key: value for key, value in entry.items() if key != "name"})
    return listed


def _from_goose(entry: Any, server: _Server, state: _Import) -> dict[str, Any] | None:
    """A Goose extension in the others' terms (None: one built into Goose, which the hub cannot run)."""
    if not isinstance(entry, dict):
        raise ConfigError(state.file, server.key, "must be an object with cmd or uri")
    if entry.get("type") in _GOOSE_BUILT_IN:
        return None
    converted: dict[str, Any] = {}
    for key, value in entry.items():
        if key in ("name", "bundled", "display_name") or (key == "enabled" and value is True):
            continue  # the name is the key; the rest describe the extension to Goose only
        if key == "enabled":
            converted["disabled"] = not _check(value, bool, "enabled", server, state)
        elif key == "env_keys":
            # Variables Goose takes from its keyring or the environment: the hub takes them from the environment.
            names = _check(value, list, "env_keys", server, state)
            env = converted.setdefault("env", {})
            if isinstance(env, dict):
                for index, name in enumerate(names):
                    env.setdefault(_text(name, f"env_keys[{index}]", server, state), f"${{{name}}}")
                    server.note(f"export {_shown(name)}: Goose reads it from its keyring or the environment")
        elif key == "envs":
            converted["env"] = {**converted.get("env", {}), **_check(value, dict, "envs", server, state)}
        else:
            converted[_GOOSE_FIELDS.get(key, key)] = value
        if key in _GOOSE_FIELDS:
            server.spelled[_GOOSE_FIELDS[key]] = key
    server.spelled.setdefault("env", "envs")
    return converted


def _unique_name(original: str, taken: Table) -> str:
    """A valid mount name for `original` not in `taken`: name, name-2, name-3, ..."""
    base = to_mount_name(original)
    suffixed = (base[: 32 - len(f"-{n}")].rstrip("-") + f"-{n}" for n in itertools.count(2))
    return next(name for name in itertools.chain((base,), suffixed) if name not in taken)


# -- one server --------------------------------------------------------------------------------


def _convert(entry: Any, server: _Server, state: _Import) -> dict[str, Any]:
    """The hub.toml values for one server entry; notes go to `server`."""
    if not isinstance(entry, dict):
        raise ConfigError(state.file, server.key, "must be an object with command or url")
    kind = _kind(entry, server, state)
    if kind == "stdio":
        values, used = _stdio_values(entry, server, state), _STDIO_FIELDS
    else:
        values, used = _remote_values(entry, kind, server, state), _REMOTE_FIELDS
    if _check(entry.get("disabled", False), bool, "disabled", server, state):
        values["enabled"] = False
    for name, value in entry.items():
        if name not in _KNOWN_FIELDS:
            server.note(f"dropped unsupported field '{_shown(name)}'")
        elif name in _KIND_FIELDS - used and value:
            where = "stdio" if kind == "stdio" else "remote"
            server.note(f"dropped field '{name}': it does not apply to a {where} server")
    return values


def _kind(entry: dict[str, Any], server: _Server, state: _Import) -> str:
    """The server's kind (stdio, streamable-http or sse), from command/url and the optional type."""
    has_command, has_url = "command" in entry, "url" in entry or "serverUrl" in entry
    if has_command == has_url:
        reason = "needs exactly one of command (a local process) or url (a remote server); fix the entry"
        raise ConfigError(state.file, server.key, reason)
    kinds = {name: _declared_kind(entry.get(name), name, has_command, server, state) for name in ("type", "transport")}
    declared = {kind for kind in kinds.values() if kind is not None}
    if len(declared) > 1:
        raise ConfigError(state.file, server.where("transport"), "disagrees with type; keep one of them")
    return declared.pop() if declared else "stdio" if has_command else "auto"


def _declared_kind(value: Any, name: str, has_command: bool, server: _Server, state: _Import) -> str | None:
    """The kind a `type` or `transport` field names (None: the field is absent)."""
    if value is None:
        return None
    kind = _TYPES.get(value) if isinstance(value, str) else None
    if kind is None or (kind == "stdio") != has_command:
        expected = "stdio" if has_command else "http or sse"
        raise ConfigError(state.file, server.where(name), f"must be {expected} for this entry; fix or remove it")
    return kind


def _stdio_values(entry: dict[str, Any], server: _Server, state: _Import) -> dict[str, Any]:
    values: dict[str, Any] = {"command": _text(entry["command"], "command", server, state)}
    args = _check(entry.get("args", []), list, "args", server, state)
    if args:
        values["args"] = [_text(arg, f"args[{index}]", server, state) for index, arg in enumerate(args)]
    env = _mapping(entry.get("env", {}), "env", server, state)
    if env:
        values["env"] = env
    if "cwd" in entry:
        values["cwd"] = _text(entry["cwd"], "cwd", server, state)
    sandbox = propose_sandbox(values, server.note)
    if sandbox is not None:
        values["sandbox"] = sandbox
    return values


_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_NETWORK_PACKAGES = re.compile(
    r"fetch|puppeteer|playwright|brave-search|github|gitlab|slack|google-maps|sentry|browser|web-search|tavily|exa-mcp",
    re.IGNORECASE,
)
"""Servers known to work over the network (their package or program names)."""


def propose_sandbox(values: dict[str, Any], note: Callable[[str], None], network: str | None = None) -> Any:
    """What a stdio server's sandbox needs beyond the hub-wide profile (README, "Sandbox"), proposed from its
    table's `values` (command, args, env): the folders its arguments name (to write in), and the network where
    it is given a URL or a credential, or is a server known to fetch pages or call a service, or where
    `network` says why it needs one (the caller knows more: a registry entry that also declares remotes).
    Each proposal is told to `note`, for a comment. None: the profile as it is."""
    words = [values["command"], *values.get("args", [])]
    folders = []
    for word in values.get("args", []):
        path = word.partition("=")[2] if word.startswith("-") and "=" in word else word
        if path.startswith(("/", "~/")) and Path(path).expanduser().is_dir():
            folders.append(path)
    why = network or _network_reason(words, values.get("env", {}))
    if why is not None:
        note(f'sandbox: the network, as {why}; write sandbox = "standard" if it needs none')
    if folders:
        note("sandbox: it may write in the folders its arguments name; write read = [...] for read-only")
    if not folders:
        return "network" if why else None
    table = tomlkit.inline_table()
    if why:
        table["profile"] = "network"
    table["write"] = folders
    return table


def _network_reason(words: list[str], env: dict[str, str]) -> str | None:
    """Why a server with this command line and env needs the network (None: nothing says it does)."""
    if any(_URL.match(word) for word in [*words, *env.values()]):
        return "its arguments or variables name a URL"
    if any(_SECRET_NAME.search(key) for key in env):
        return "it is given a credential for a service"
    if any(_NETWORK_PACKAGES.search(word) for word in words[:3]):
        return "it is a server that fetches pages or calls a service"
    return None


def _remote_values(entry: dict[str, Any], kind: str, server: _Server, state: _Import) -> dict[str, Any]:
    field_name = "url" if "url" in entry else "serverUrl"
    values: dict[str, Any] = {"url": _text(entry[field_name], field_name, server, state)}
    if kind != "auto":
        values["transport"] = kind
    headers = _mapping(entry.get("headers", {}), "headers", server, state)
    auth = entry.get("auth")
    if auth == "oauth":
        server.note("dropped 'auth': the hub does not sign in to servers with OAuth; give it a token in headers")
    elif auth is not None and "Authorization" not in headers:
        # FastMCP: a string is a bearer token.
        token = f"Bearer {_check(auth, str, 'auth', server, state)}"
        headers["Authorization"] = _redact(token, "headers", "auth", server, state)
    if headers:
        values["headers"] = headers
    return values


def _mapping(value: Any, name: str, server: _Server, state: _Import) -> InlineTable:
    """An env or headers object with hub variables; secret-looking literals are redacted."""
    table = tomlkit.inline_table()
    for key, raw in _check(value, dict, name, server, state).items():
        text = _text(raw, f"{name}.{key}", server, state)
        if raw and _SECRET_NAME.search(key) and not variable_references(text):
            text = _redact(raw, name, key, server, state)
        table[key] = text
    return table


def _redact(secret: str, name: str, key: str, server: _Server, state: _Import) -> str:
    """A `${VARIABLE}` reference standing for `secret` (a header keeps its auth scheme)."""
    derived = variable_name(f"{server.name}_{key}").upper()
    scheme = _AUTH_SCHEME.match(secret) if name == "headers" else None
    if scheme is not None:
        secret = secret[scheme.end() :]
    variable = state.secret_variable(variable_name(key) if name == "env" else derived, derived, secret)
    server.note(f"export {variable} before starting the hub: its secret value was removed from this file")
    return f"{scheme[0] if scheme else ''}${{{variable}}}"


def _text(value: Any, name: str, server: _Server, state: _Import) -> str:
    """A string value in hub syntax: client variables translated, other `$` escaped."""
    text = _check(value, str, name, server, state)

    def translate(match: re.Match[str]) -> str:
        if match["kind"] == "input":
            variable = variable_name(match["ref"]).upper()
            server.note(f'export {variable}: it stands for VS Code input "{_shown(match["ref"])}"')
            return f"${{{variable}}}"
        if match["kind"] == "env":
            return f"${{{variable_name(match['ref'])}}}"
        if match["continue"]:
            variable = variable_name(match["name"])
            server.note(f'export {variable}: it stands for Continue {match["continue"][:-1]} "{_shown(match["name"])}"')
            return f"${{{variable}}}"
        return match["plain"] or "$$"

    return _CLIENT_VARIABLE.sub(translate, text)


def _check(value: Any, expected: type, name: str, server: _Server, state: _Import) -> Any:
    if not isinstance(value, expected):
        kinds = {str: "a string", list: "an array", dict: "an object", bool: "true or false"}
        raise ConfigError(state.file, server.where(name), f"must be {kinds[expected]}; fix the value")
    return value


def variable_name(text: str) -> str:
    """`text` as an environment variable name: letters, digits and '_', no leading digit."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "SECRET"
    return f"_{name}" if name[0].isdigit() else name


def _table(notes: list[str], values: dict[str, Any]) -> Table:
    """A [servers.NAME] table: the notes as comments, then the values, then a blank line."""
    table = tomlkit.table()
    for note in notes:
        table.add(tomlkit.comment(note))
    for key, value in values.items():
        table.add(key, value)
    table.add(tomlkit.nl())
    return table


def _shown(text: str) -> str:
    """`text` safe inside a one-line comment (control characters and quotes escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)

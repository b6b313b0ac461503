"""Migrate MCP client JSON configs into hub.toml.

Understands Claude Desktop / Cursor / Windsurf files (`{"mcpServers": {...}}`), VS Code
`mcp.json` (`{"servers": {...}, "inputs": [...]}`) and VS Code `settings.json`
(`{"mcp": {"servers": {...}}}`); comments and trailing commas, as VS Code allows, are fine.

The output never contains a literal secret: env values and headers whose names look secret
become `${VARIABLE}` references, with a comment telling the user what to export.
`${input:ID}` / `${env:NAME}` become `${ID}` / `${NAME}`; `${NAME}` and `${NAME:-default}`
(Claude Code's syntax, and the hub's) stay; every other `$` is escaped as `$$`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.items import InlineTable, Table

from mcp_hub.config import dotted_key, to_mount_name, variable_references
from mcp_hub.errors import ConfigError

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|AUTH|PAT(?!H)", re.IGNORECASE)
_AUTH_SCHEME = re.compile(r"(?:Bearer|Basic|Token)\s+(?=\S)", re.IGNORECASE)
_CLIENT_VARIABLE = re.compile(
    r"\$\{(?P<kind>input|env):(?P<ref>[^}]*)\}|(?P<plain>\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^$}]*)?\})|\$"
)
_JSON_STRING = r'"(?:[^"\\\n]|\\.)*"'
_JSON_COMMENT = re.compile(rf"{_JSON_STRING}|//[^\n]*|/\*.*?\*/", re.DOTALL)
_JSON_TRAILING_COMMA = re.compile(rf"{_JSON_STRING}|,(?=\s*[}}\]])")

_TYPES = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamableHttp": "streamable-http",
    "sse": "sse",
}
_STDIO_FIELDS = frozenset(("command", "args", "env", "cwd"))
_REMOTE_FIELDS = frozenset(("url", "serverUrl", "headers"))  # serverUrl: Windsurf
_KIND_FIELDS = _STDIO_FIELDS | _REMOTE_FIELDS
_KNOWN_FIELDS = _KIND_FIELDS | {"type", "disabled"}


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

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def import_client_config(text: str, file: str) -> tomlkit.TOMLDocument:
    """The servers of a client's JSON config (`text`, read from `file`) as a hub.toml document."""
    where, entries = _find_servers(_load_json(text, file), file)
    state = _Import(file)
    servers = tomlkit.table(is_super_table=True)
    for original, entry in entries.items():
        server = _Server(_unique_name(original, servers), dotted_key((*where, original)))
        if server.name != original:
            server.note(f'imported from "{_shown(original)}"')
        values = _convert(entry, server, state)
        servers.add(server.name, _table(server.notes, values))
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"servers imported from {_shown(file)}"))
    doc.add("servers", servers)
    return doc


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


def _blank(comment: str) -> str:
    return re.sub(r"[^\n]", " ", comment)


def _find_servers(data: Any, file: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """Where the servers object is, and the object itself."""
    if isinstance(data, dict):
        mcp = data.get("mcp")
        candidates = {
            ("mcpServers",): data.get("mcpServers"),
            ("servers",): data.get("servers"),
            ("mcp", "servers"): mcp.get("servers") if isinstance(mcp, dict) else None,
        }
        for where, servers in candidates.items():
            if isinstance(servers, dict):
                return where, servers
            if servers is not None:
                raise ConfigError(file, dotted_key(where), "must be an object mapping server names to their settings")
    raise ConfigError(
        file,
        "",
        'no MCP servers found; expected a top-level "mcpServers" object (Claude Desktop, Cursor, Windsurf), '
        '"servers" (VS Code mcp.json) or "mcp": {"servers": ...} (VS Code settings.json)',
    )


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
            server.note(f"dropped field '{name}': it does not apply to a {kind} server")
    return values


def _kind(entry: dict[str, Any], server: _Server, state: _Import) -> str:
    """The server's kind (stdio, streamable-http or sse), from command/url and the optional type."""
    has_command, has_url = "command" in entry, "url" in entry or "serverUrl" in entry
    if has_command == has_url:
        reason = "needs exactly one of command (a local process) or url (a remote server); fix the entry"
        raise ConfigError(state.file, server.key, reason)
    declared = entry.get("type")
    if declared is None:
        return "stdio" if has_command else "streamable-http"
    kind = _TYPES.get(declared) if isinstance(declared, str) else None
    if kind is None or (kind == "stdio") != has_command:
        expected = "stdio" if has_command else "http or sse"
        raise ConfigError(state.file, f"{server.key}.type", f"must be {expected} for this entry; fix or remove it")
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
    return values


def _remote_values(entry: dict[str, Any], kind: str, server: _Server, state: _Import) -> dict[str, Any]:
    field_name = "url" if "url" in entry else "serverUrl"
    values: dict[str, Any] = {"url": _text(entry[field_name], field_name, server, state)}
    if kind == "sse":
        values["transport"] = "sse"
    headers = _mapping(entry.get("headers", {}), "headers", server, state)
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
    derived = _variable_name(f"{server.name}_{key}").upper()
    scheme = _AUTH_SCHEME.match(secret) if name == "headers" else None
    if scheme is not None:
        secret = secret[scheme.end() :]
    variable = state.secret_variable(_variable_name(key) if name == "env" else derived, derived, secret)
    server.note(f"export {variable} before starting the hub: its secret value was removed from this file")
    return f"{scheme[0] if scheme else ''}${{{variable}}}"


def _text(value: Any, name: str, server: _Server, state: _Import) -> str:
    """A string value in hub syntax: client variables translated, other `$` escaped."""
    text = _check(value, str, name, server, state)

    def translate(match: re.Match[str]) -> str:
        if match["kind"] == "input":
            variable = _variable_name(match["ref"]).upper()
            server.note(f'export {variable}: it stands for VS Code input "{_shown(match["ref"])}"')
            return f"${{{variable}}}"
        if match["kind"] == "env":
            return f"${{{_variable_name(match['ref'])}}}"
        return match["plain"] or "$$"

    return _CLIENT_VARIABLE.sub(translate, text)


def _check(value: Any, expected: type, name: str, server: _Server, state: _Import) -> Any:
    if not isinstance(value, expected):
        kinds = {str: "a string", list: "an array", dict: "an object", bool: "true or false"}
        raise ConfigError(state.file, f"{server.key}.{name}", f"must be {kinds[expected]}; fix the value")
    return value


def _variable_name(text: str) -> str:
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

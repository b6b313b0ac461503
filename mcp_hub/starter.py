"""`mcp-hub init`: a starter hub.toml and the shipped policies, and what to do next.

`init` writes, into a folder (by default the user's config folder for mcp-hub: `~/.config/mcp-hub` on Linux,
`~/Library/Application Support/mcp-hub` on macOS, `%LOCALAPPDATA%\\mcp-hub` on Windows), the hub.toml that
`mcp-hub import --output` writes for a new file (`importer.create_config`: pinning with the poisoning scan and
the audit log on, the shipped policies in `policies/` beside it), with the MCP servers of the clients it is
asked to import from their usual config files (`clients.client_config_files`), or, when it imports none, the
example servers that ship with the hub. It never replaces a hub.toml unless forced, and then keeps the old one
as `hub.toml.bak`.

`next_steps` says how to check the servers and how to add the hub to Claude Desktop: a JSON snippet that runs
this installation of mcp-hub (`hub_command`) on that hub.toml, both by absolute path, so that it works from
whatever folder the client starts it in.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tomlkit
from platformdirs import user_config_path

from mcp_hub.clients import CLIENTS, client_config_files
from mcp_hub.errors import ConfigError
from mcp_hub.importer import (
    NoServers,
    combined,
    create_config,
    import_client_config,
    secret_env_names,
)
from mcp_hub.upstream.command import find_command

NOTES = """\
# An example server that ships with the hub: notes kept in memory.
[servers.notes]
command = "mcp-hub-example-notes"

"""

TIME = """\
# PyPI's mcp-server-time (installed with mcp-hub's [examples] extra).
[servers.time]
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]

"""

TIME_MISSING = """\
# PyPI's mcp-server-time: install mcp-hub with its [examples] extra (README, "Quick start"), then uncomment:
# [servers.time]
# command = "mcp-server-time"
# args = ["--local-timezone", "UTC"]

"""

MORE = """\
# More servers, for instance (needs Node.js):
# [servers.everything]
# command = "npx"
# args = ["-y", "@modelcontextprotocol/server-everything"]
#
# A remote server, with a secret taken from the environment:
# [servers.github]
# url = "https://api.githubcopilot.com/mcp/"
# headers = { Authorization = "Bearer ${GITHUB_TOKEN}" }
"""


@dataclass
class Started:
    """What `init` wrote, and from where."""

    config: Path
    """The hub.toml written (absolute)."""
    policies: Path | None
    """The policy folder written beside it; None: one was there already, and was kept."""
    servers: list[str]
    """The servers the hub.toml mounts."""
    clients: list[str] = field(default_factory=list)
    """The clients whose servers were imported (keys of `clients.CLIENTS`)."""
    read: list[Path] = field(default_factory=list)
    """The client config files whose servers were imported."""
    left_out: list[str] = field(default_factory=list)
    """Servers left out: a file read before gave a server that name."""
    secrets: list[str] = field(default_factory=list)
    """The variables the hub.toml references for the secrets taken out of the imported files."""
    backup: Path | None = None
    """Where the hub.toml it replaced (forced) was kept."""


def default_folder() -> Path:
    """Where `mcp-hub init` writes without `--dir`: the user's config folder for mcp-hub."""
    return user_config_path("mcp-hub", appauthor=False)


def init(
    folder: Path,
    clients: Sequence[str] = (),
    *,
    force: bool = False,
    home: Path | None = None,
    cwd: Path | None = None,
) -> Started:
    """Write `folder`/hub.toml and `folder`/policies/ (kept if there already). `clients`: import the servers of
    these MCP clients (keys of `clients.CLIENTS`) from their config files, for the user whose home is `home`,
    working in `cwd` (by default the current user and folder); none: the example servers. ConfigError, and
    nothing written, when hub.toml exists (unless `force`: then it is kept as hub.toml.bak) or a client has no
    config file with servers."""
    folder = Path(os.path.abspath(folder.expanduser()))
    config = folder / "hub.toml"
    if config.exists() and not force:
        raise ConfigError(
            str(config),
            "",
            "exists already, and `mcp-hub init` does not overwrite it: edit it, add another client's servers with "
            f"`mcp-hub import FILE --output {config}`, write elsewhere with --dir, or replace it with --force "
            "(the old file is kept as hub.toml.bak)",
        )
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    secrets: dict[str, str] = {}
    imports: list[tomlkit.TOMLDocument] = []
    read: list[Path] = []
    for client in dict.fromkeys(clients):
        found = _client_servers(client, home, cwd, secrets)
        if not found:
            paths = ", ".join(str(path) for path in client_config_files(client, home=home, cwd=cwd))
            raise ConfigError(
                f"--from {client}",
                "",
                f"found no {CLIENTS[client]} config with MCP servers (looked at {paths}); leave out --from {client}, "
                "or import the file where your servers are with `mcp-hub import FILE --output HUB.TOML`",
            )
        for path, document in found:
            read.append(path)
            imports.append(document)
    document, left_out = combined(imports)
    if not document.get("servers"):
        document = tomlkit.parse(examples())
    servers = list(document.get("servers", {}))
    backup = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if config.exists():
            backup = config.with_name("hub.toml.bak")
            os.replace(config, backup)
        policies = create_config(config, document)
    except OSError as exc:
        why = f"cannot write there ({exc.strerror}: {exc.filename}); choose another folder with --dir"
        raise ConfigError(str(folder), "", why) from None
    return Started(
        config,
        policies,
        servers,
        clients=list(dict.fromkeys(clients)),
        read=read,
        left_out=left_out,
        secrets=secret_env_names(document),
        backup=backup,
    )


def examples() -> str:
    """The servers of a hub.toml that imports none: the example notes server, which ships with the hub, and
    PyPI's mcp-server-time where it is installed (beside this Python, or on PATH), commented out elsewhere."""
    time = TIME if find_command("mcp-server-time") else TIME_MISSING
    return NOTES + time + MORE


def found_clients(home: Path, cwd: Path) -> list[tuple[str, Path]]:
    """The clients' config files (as `init --from` would read them) that hold MCP servers, by client."""
    found: list[tuple[str, Path]] = []
    for client in CLIENTS:
        try:
            found += [(client, path) for path, _ in _client_servers(client, home, cwd, {})]
        except ConfigError:  # a file that does not read; `--from` would say why
            continue
    return found


def _client_servers(
    client: str, home: Path, cwd: Path, secrets: dict[str, str]
) -> list[tuple[Path, tomlkit.TOMLDocument]]:
    """Each config file of `client` that has servers, with them as a hub.toml document."""
    found: list[tuple[Path, tomlkit.TOMLDocument]] = []
    for path in client_config_files(client, home=home, cwd=cwd):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ConfigError(str(path), "", f"cannot read the file ({exc.strerror}); check its permissions") from None
        try:
            document = import_client_config(text, str(path), secrets)
        except NoServers:  # ~/.claude.json without user-scope servers; a settings.json without "mcp"
            continue
        if document.get("servers"):
            found.append((path, document))
    return found


def hub_command() -> list[str]:
    """The command that runs this installation of mcp-hub from any folder: its `mcp-hub` script by absolute path
    when that is what runs now, else this Python with `-m mcp_hub`."""
    script = Path(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else None
    if script is not None and script.stem == "mcp-hub":
        for candidate in (script, script.with_name(script.name + ".exe")):  # Windows' launcher drops the .exe
            if candidate.is_file():
                return [str(candidate)]
    return [sys.executable, "-m", "mcp_hub"]


def next_steps(started: Started, command: Sequence[str], *, home: Path, cwd: Path) -> str:
    """What to do after `init`: check the servers, add the hub to Claude Desktop (`command` runs the hub), and
    the other clients' servers that could be imported too."""
    config = str(started.config)
    run = " ".join(_quoted(part) for part in command)
    entry: dict[str, object] = {"command": command[0], "args": [*command[1:], "serve", "--config", config]}
    if started.secrets:
        entry["env"] = {name: f"<the value of {name}>" for name in started.secrets}
    claude = client_config_files("claude", home=home, cwd=cwd)[0]
    lines = [
        "",
        "Next:",
        "- check that every server starts, and see what it offers:",
        f"    {run} check --connect --config {_quoted(config)}",
        f"- add the hub to Claude Desktop, in {claude} (Settings > Developer > Edit Config), and restart it:",
        "",
        *("    " + line for line in json.dumps({"mcpServers": {"hub": entry}}, indent=2).splitlines()),
        "",
    ]
    if started.secrets:
        lines += [
            f'  The hub.toml takes {", ".join(started.secrets)} from the environment: put the values in "env"',
            "  above (Claude Desktop does not pass on your shell's variables); in a terminal, export them first.",
        ]
    if "claude" in started.clients:
        lines.append("  Then take out of that file the servers the hub now runs, or Claude Desktop starts each twice.")
    lines.append(
        f"- or serve MCP clients over HTTP, at http://127.0.0.1:8765/mcp: {run} serve --transport http "
        f"--config {_quoted(config)}"
    )
    others = [(client, path) for client, path in found_clients(home, cwd) if path not in started.read]
    if others:
        lines.append("- servers of other MCP clients found; add them to this hub.toml with:")
        lines += [f"    {run} import {_quoted(str(path))} --output {_quoted(config)}" for _, path in others]
    return "\n".join(lines)


def _quoted(text: str) -> str:
    """`text` as one word of a shell command line (quoted only when it must be)."""
    if text and all(c.isalnum() or c in "-_./:=+@%,\\" for c in text):
        return text
    return json.dumps(text)

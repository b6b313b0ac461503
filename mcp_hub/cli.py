"""`mcp-hub`: flags in, config loaded, the hub run. No logic of its own.

    mcp-hub init   [--dir PATH] [--from claude|claude-code|cursor|vscode|windsurf ...] [--force]
    mcp-hub serve  [--config PATH] [--transport stdio|http] [--host H] [--port P] [--endpoint NAME]
    mcp-hub check  [--config PATH] [--connect]
    mcp-hub tools  [--config PATH] [--json | --format openai|openai-responses|anthropic|gemini [--principal P]]
                   [--endpoint NAME]
    mcp-hub import FILE [--output PATH] [--force]
    mcp-hub add NAME[@VERSION] [--config PATH] [--registry URL] [--name MOUNT] [--use npm|pypi|oci|remote] [--force]
    mcp-hub add URL [--config PATH] [--name MOUNT] [--force]    (a remote server, from its server card)
    mcp-hub registry search TEXT [--config PATH] [--registry URL] [--limit N]
    mcp-hub pins [--config PATH] [list | accept (KEY... | --all)]
    mcp-hub connections [--config PATH] [list | revoke | withdraw | key] [--principal P] [--client C] [--server S]
    mcp-hub explain (--principal P | --claims JSON) (--tool T | --prompt P | --resource URI) [--args JSON]
                    [--config PATH]

Exit codes: 0 fine, 1 a mount failed to connect, or (`check`) a server cannot start: its command is not found, or
a variable its table needs is not set (connections revoke: an authorization server did not revoke the tokens the
hub forgot), 2 unusable configuration or input (a busy HTTP port included).
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from mcp_hub import __version__
from mcp_hub.allocator import keep_freed_memory
from mcp_hub.auth.refusal import Refusal, Unavailable
from mcp_hub.catalog.catalog import KINDS, Kind
from mcp_hub.catalog.naming import split_uri
from mcp_hub.catalog.pins import PinStore
from mcp_hub.catalog.shared_pins import accept_shared, read_shared
from mcp_hub.chain.guardrails import configured_secrets
from mcp_hub.clients import CLIENTS
from mcp_hub.cluster import errors as cluster_errors
from mcp_hub.config import HubConfig, ServerConfig, load_config, unauthenticated_exposure
from mcp_hub.errors import ConfigError
from mcp_hub.guardrails import Detectors
from mcp_hub.hub import Hub
from mcp_hub.observe.audit_log import AuditEvent, AuditLog, appending
from mcp_hub.observe.audit_sink import describe
from mcp_hub.observe.audit_sinks import sinks_of
from mcp_hub.policy import Target, empty_policy, explain, load_policies
from mcp_hub.policy.budgets import CompiledBudget, Usage
from mcp_hub.providers import FORMATS, SchemaError, Toolset, export
from mcp_hub.search.ranking import planned
from mcp_hub.server.curated import selections
from mcp_hub.shown import shown
from mcp_hub.upstream import State
from mcp_hub.upstream.command import command_not_found, find_command
from mcp_hub.upstream.sandbox import describe as sandbox_report
from mcp_hub.upstream.stderr import collapsed

if TYPE_CHECKING:
    from mcp_hub.credentials.connections import Consent
    from mcp_hub.credentials.revocation import Revoked

_KIND_KEYS = {
    "tools": "tools",
    "prompts": "prompts",
    "resources": "resources",
    "resource_templates": "resourceTemplates",
}

_CONFIG_HELP = "the hub's config file (default: ./hub.toml, else the one `mcp-hub init` wrote)"

_STDERR_LINES = 10
"""How many of its last stderr lines `check --connect` shows under a stdio server that did not come up."""


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if getattr(args, "config", "") is None:
        args.config = _default_config()
    try:
        code = args.run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


def _default_config() -> str:
    """./hub.toml, or where there is none, the hub.toml `mcp-hub init` writes by default (the user's config folder)
    if there is one there: a hub set up with `init` answers from any folder without `--config`."""
    if Path("hub.toml").exists():
        return "hub.toml"
    from mcp_hub.starter import default_folder  # tomlkit: only without a ./hub.toml

    written = default_folder() / "hub.toml"
    return str(written) if written.is_file() else "hub.toml"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-hub", description="One MCP endpoint in front of many MCP servers.")
    parser.add_argument("--version", action="version", version=f"mcp-hub {__version__}")
    commands = parser.add_subparsers(
        required=True, metavar="COMMAND", help="run `mcp-hub COMMAND --help` for its options"
    )

    def command(name: str, help: str, run: Any) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(run=run)
        return sub

    init = command(
        "init",
        "Write a starter hub.toml and the default policies (in the user's config folder unless --dir), and say "
        "how to add the hub to Claude Desktop.",
        _init,
    )
    init.add_argument(
        "--dir", help="the folder to write hub.toml and policies/ in (default: the user's config folder for mcp-hub)"
    )
    init.add_argument(
        "--from",
        dest="clients",
        action="append",
        default=[],
        choices=list(CLIENTS),
        help="import the MCP servers of this client from its usual config files (repeatable); "
        "without: the example servers",
    )
    init.add_argument("--force", action="store_true", help="replace an existing hub.toml (kept as hub.toml.bak)")

    serve = command("serve", "Serve the hub over stdio (default) or streamable HTTP.", _serve)
    serve.add_argument("--config", help=_CONFIG_HELP)
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default): one MCP client that starts the hub; http: streamable HTTP at [http] host:port",
    )
    serve.add_argument("--host", help="HTTP host (default: [http] host, 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default: [http] port, 8765)")
    serve.add_argument("--endpoint", metavar="NAME", help="serve the [endpoints.NAME] view instead of everything")

    check = command("check", "Validate the config; with --connect, connect to every server and report.", _check)
    check.add_argument("--config", help=_CONFIG_HELP)
    check.add_argument("--connect", action="store_true", help="also connect to each server and list what it offers")

    tools = command("tools", "Print the merged catalog a client would see.", _tools)
    tools.add_argument("--config", help=_CONFIG_HELP)
    tools.add_argument("--json", action="store_true", help="print the catalog as JSON")
    tools.add_argument("--format", choices=FORMATS, help="print the tools as a model provider's tool definitions")
    tools.add_argument("--principal", default="stdio", help='with --format: the tools this principal may see ("stdio")')
    tools.add_argument("--endpoint", metavar="NAME", help="what the [endpoints.NAME] view serves")

    explain = command("explain", "Show how the policy decides one call, and which rule decides it.", _explain)
    explain.add_argument("--config", help=_CONFIG_HELP)
    caller = explain.add_mutually_exclusive_group(required=True)
    caller.add_argument("--principal", help='who calls: "stdio", or an API key\'s name')
    caller.add_argument(
        "--claims", help="who calls, by an access token's claims as a JSON object (or @FILE); needs [auth.oauth]"
    )
    target = explain.add_mutually_exclusive_group(required=True)
    target.add_argument("--tool", help="MOUNT/NAME or the public name MOUNT_NAME")
    target.add_argument("--prompt", help="MOUNT/NAME or the public name MOUNT_NAME")
    target.add_argument("--resource", help="MOUNT+URI (the public URI) or MOUNT/URI")
    explain.add_argument("--args", default="{}", help="the call's arguments as a JSON object")

    pins = command("pins", "List tools whose definition changed since pinned; accept the changes.", _pins)
    pins.add_argument("--config", help=_CONFIG_HELP)
    pins.add_argument(
        "action", nargs="?", choices=["list", "accept"], default="list", help="list (default) or accept changes"
    )
    pins.add_argument("keys", nargs="*", metavar="MOUNT/TOOL", help="the changes to accept")
    pins.add_argument("--all", action="store_true", help="accept every pending change")

    connections = command(
        "connections",
        'List the sign-ins of people to mode = "user" and "enterprise" servers and the clients they allowed; '
        "revoke a sign-in; withdraw a consent; make a key.",
        _connections,
    )
    connections.add_argument("--config", help=_CONFIG_HELP)
    connections.add_argument(
        "action",
        nargs="?",
        choices=["list", "revoke", "withdraw", "key"],
        default="list",
        help="list (default) the sign-ins and consents, revoke a sign-in, withdraw a consent, or print a new key",
    )
    connections.add_argument("--principal", help="only this principal's (revoke, withdraw: required)")
    connections.add_argument(
        "--client", help="the MCP client whose consent to forget (withdraw: required); list: only its consents"
    )
    connections.add_argument("--server", help="only this server's")

    imp = command("import", "Convert an MCP client's config (JSON, or Goose/Continue YAML) to hub.toml.", _import)
    imp.add_argument("file", help="the config file (e.g. claude_desktop_config.json, .mcp.json, goose config.yaml)")
    imp.add_argument("--output", help="add the servers to this hub.toml (created if missing); default: print")
    imp.add_argument("--force", action="store_true", help="replace servers of the same name in --output")

    registry_help = "the registry's base URL (default: [hub] registry of --config, else the official MCP Registry)"
    add = command(
        "add",
        "Add a server from an MCP server registry to hub.toml, its version pinned; or a remote server by its URL, "
        "from its server card.",
        _add,
    )
    add.add_argument(
        "server",
        metavar="NAME[@VERSION] | URL",
        help="its registry name, like io.github.user/weather; or its MCP endpoint's URL (or its card's), like "
        "https://host/mcp, to add it as its server card (SEP-2127) describes it",
    )
    add.add_argument("--config", help="the hub.toml to add it to (created if missing; default: as `serve` finds it)")
    add.add_argument("--registry", metavar="URL", help=registry_help)
    add.add_argument("--name", metavar="MOUNT", help="the mount name (default: the last part of its registry name)")
    add.add_argument(
        "--use",
        choices=["npm", "pypi", "oci", "remote"],
        help="which of the entry's packages or remotes to run (default: its first package of these kinds, else its "
        "first remote)",
    )
    add.add_argument("--force", action="store_true", help="replace a server of the same name")

    registry = command("registry", "Look servers up in an MCP server registry.", None)
    registry_commands = registry.add_subparsers(required=True, metavar="ACTION", help="search: find servers by text")
    search = registry_commands.add_parser(
        "search",
        help="list the servers whose name contains TEXT",
        description="List the servers whose name contains TEXT: name, latest version, what it runs as (npm, pypi, "
        "oci, remote), description.",
    )
    search.set_defaults(run=_registry_search)
    search.add_argument("text", metavar="TEXT", help="part of the servers' names")
    search.add_argument("--config", help="the hub.toml whose [hub] registry to read (default: as `serve` finds it)")
    search.add_argument("--registry", metavar="URL", help=registry_help)
    search.add_argument("--limit", type=int, default=30, help="list at most this many (default: 30)")
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


# -- commands -------------------------------------------------------------------


def _init(args: argparse.Namespace) -> int:
    from mcp_hub import starter  # tomlkit: only this command

    started = starter.init(Path(args.dir) if args.dir else starter.default_folder(), args.clients, force=args.force)
    if started.backup is not None:
        print(f"kept the previous {started.config.name} as {started.backup}")
    for path in started.read:
        print(f"imported the servers of {path}")
    for name in started.left_out:
        print(f"left out server {name!r}: a file read before has a server of that name")
    print(f"wrote {started.config} (servers: {', '.join(started.servers)})")
    if started.policies is not None:
        print(f"wrote {started.policies}{os.sep} (the default policies; see the README, Policy)")
    else:
        print(f"kept {started.config.parent / 'policies'}{os.sep} as it is")
    print(starter.next_steps(started, starter.hub_command(), home=Path.home(), cwd=Path.cwd()))
    return 0


def _serve(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.transport == "http":  # before anything starts (Hub.serve refuses too, for the library)
        refusal = unauthenticated_exposure(config, args.host or config.http.host)
        if refusal is not None:
            raise refusal
    _setup_logging(config.hub.log_level)
    keep_freed_memory()
    # uvloop, where installed, runs the event loop faster (uvicorn likewise picks httptools).
    hub = Hub(config, endpoint=args.endpoint)
    if (
        args.transport == "stdio" and sys.stdin is not None and sys.stdin.isatty()
    ):  # started by hand, not by an MCP client
        print(
            "mcp-hub: serving MCP over stdio: waiting for an MCP client on stdin (an MCP client starts this "
            "command itself); to serve HTTP instead: mcp-hub serve --transport http",
            file=sys.stderr,
        )
    anyio.run(hub.serve, args.transport, args.host, args.port, backend_options=_loop_options())
    return 0


def _loop_options() -> dict[str, Any]:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return {}
    return {"use_uvloop": True}


def _check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    curated = selections(config)
    servers = config.enabled_servers()
    print(f"{config.path}: ok, {len(servers)} server(s) enabled")
    if curated:
        below = config.http.path.rstrip("/")
        print(f"endpoints: {', '.join(f'{below}/{name}' for name in curated)}")
    if config.policy.dir:
        policy = load_policies(config.relative(config.policy.dir))
        print(
            f"{config.relative(config.policy.dir)}: ok, revision {policy.revision}, {len(policy.profiles)} profile(s)"
        )
    sinks = sinks_of(config)  # a TLS file that cannot be read: a ConfigError naming its key
    if sinks:
        print(f"audit sinks: {', '.join(f'{sink.description} ({sink.format})' for sink in sinks)}")
    exposure = unauthenticated_exposure(config, config.http.host)
    if exposure is not None:  # stdio still serves; HTTP would refuse to start
        print(f"warning: `serve --transport http` would refuse to start: {exposure}", file=sys.stderr)
    oauth, sso = config.auth.oauth, config.admin.oidc
    if oauth is not None:
        from mcp_hub.auth.metadata import metadata_url  # with the HTTP app's routes: not needed to serve stdio

        print(f"[auth.oauth]: ok, tokens of {oauth.issuer} for {oauth.resource}; metadata at {metadata_url(oauth)}")
    if sso is not None:
        admins = f"{sso.admin_claim} holds one of {', '.join(sso.admin_values)}"
        print(f"[admin.oidc]: ok, the console's single sign-on at {sso.issuer}; administrators: {admins}")
    if config.search.enabled:
        ranking, embeddings = planned(config.search.ranking)
        if embeddings:
            ranking = f"{ranking} ({', '.join(embeddings)})"
        elif config.search.ranking != "bm25":
            asked = config.search.ranking
            needs = "pip install -e '.[search]' or -e '.[search-model]' from the checkout"
            ranking = f'bm25 ("{asked}" needs an embedding: {needs})'
        print(f"tool search: on, ranked by {ranking}")
    if config.skills.folder is not None:
        folder = config.servers[config.skills.mount].args[-1]
        print(
            f"[skills]: the skills of {folder}, served by the hub's mcp-hub-skills as the mount {config.skills.mount!r}"
        )
    if not args.connect:
        unusable = 0
        for name, server in config.servers.items():
            kind = "streamable-http, or sse if refused" if server.kind == "auto" else server.kind
            problem = _cannot_start(server)
            unusable += problem is not None
            shown_state = f": {problem}" if problem else "" if server.enabled else " (disabled)"
            print(f"  {name}: {kind}{shown_state}")
            sandbox = sandbox_report(server)
            if sandbox is not None and server.enabled:
                print(f"    sandbox: {sandbox['summary']}")
        return 1 if unusable else 0
    _setup_logging("error")
    failed = 0
    if oauth is not None:
        from mcp_hub.auth.verifier import probe  # the token checks: only for [auth.oauth]

        try:
            print(f"  {oauth.issuer}: {anyio.run(probe, oauth)}")
        except Unavailable as exc:
            failed += 1
            print(f"  {oauth.issuer}: unavailable: {exc}")
    if sso is not None:
        from mcp_hub.admin.sso import probe as probe_sso  # the ID token checks: only for [admin.oidc]

        try:
            print(f"  {sso.issuer}: {anyio.run(probe_sso, sso)}")
        except Unavailable as exc:
            failed += 1
            print(f"  {sso.issuer}: unavailable: {exc}")
    for sink in sinks:
        try:
            print(f"  audit sink {sink.description}: {sink.transport.probe()}")
        except Exception as exc:  # OSError, ssl.SSLError, ConnectionError
            failed += 1
            print(f"  audit sink {sink.description}: unreachable: {describe(exc)}")
    hub = anyio.run(_connected_hub, config)
    for name, report in hub.items():
        counts = ", ".join(f"{report[kind]} {kind.replace('_', ' ')}" for kind in KINDS)
        if report["state"] == State.UP:
            print(f"  {name}: up ({report['transport']}, protocol {report['protocol']}): {counts}")
            for session in report["sessions"]:
                version = session["protocol"] or "not open"
                print(f"    {session['serves']}: {version} ({session['why']})")
        else:
            failed += 1
            reason = report["waiting_for"] or report["last_error"] or "no connection attempt yet"
            print(f"  {name}: {_state(report)}: {reason}")
            for line in collapsed(report["stderr"])[-_STDERR_LINES:]:
                print(f"    stderr: {line}")
        if "sandbox" in report:
            print(f"    sandbox: {report['sandbox']['summary']}")
            if report["sandbox"]["limit_hit"]:
                print(f"    sandbox limit: {report['sandbox']['limit_hit']}")
        for method, why in report["refused"].items():
            print(f"    refused {method}: {why}")
        for line in report["skipped"]:
            print(f"    skipped {line}")
    return 1 if failed else 0


def _cannot_start(server: ServerConfig) -> str | None:
    """Why an enabled server cannot start, as far as can be told without starting it: a variable its table needs
    is not set, or (stdio) its command is found nowhere. None: nothing known against it."""
    if server.unusable is not None:
        return f"disabled: {server.unusable}"
    if server.enabled and server.command is not None and find_command(server.command, server.cwd) is None:
        return command_not_found(server.command, server.cwd)
    sandbox = sandbox_report(server)
    if server.enabled and sandbox is not None and sandbox["status"] == "refused":
        return f"its sandbox: {sandbox['summary']}"
    return None


def _state(report: dict[str, Any]) -> str:
    """A mount's state as the commands show it: one that is trying again after a failed attempt is down (its
    supervisor calls it starting while the next attempt is under way)."""
    if report["state"] == State.STARTING and report["last_error"]:
        return str(State.DOWN)
    return str(report["state"])


def _tools(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    _setup_logging("error")
    if args.format:
        return _exported(args, config)
    catalog: dict[str, list[dict[str, Any]]] = {}
    health = anyio.run(_connected_hub, config, catalog, None, args.endpoint)
    down = {name: r for name, r in health.items() if r["state"] != State.UP}
    for name, report in down.items():
        print(f"warning: server '{name}' is {_state(report)}: {report['last_error']}", file=sys.stderr)
    if args.json:
        print(json.dumps(catalog, indent=2))
        return 1 if down else 0
    for kind in KINDS:
        items = catalog[_KIND_KEYS[kind]]
        print(f"{kind.replace('_', ' ')} ({len(items)}):")
        for item in items:
            label = item.get("name") if kind in ("tools", "prompts") else item.get("uri") or item.get("uriTemplate")
            description = (item.get("description") or "").strip().splitlines()
            # Servers' names and descriptions, shown with the characters that would deceive a reader escaped.
            print(f"  {shown(str(label))}" + (f"  {shown(description[0])}" if description else ""))
    return 1 if down else 0


async def _connected_hub(
    config: HubConfig,
    catalog: dict[str, list[dict[str, Any]]] | None = None,
    visible: tuple[str, list[dict[str, Any]]] | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Start the hub, let every mount connect (or fail), report, and stop: what the servers list now, not
    what the catalog snapshot remembers (which it leaves as it is). `visible`: (principal, a list to fill
    with the tools its policy lets it see); `endpoint`: of the `[endpoints.NAME]` view only."""
    unsaved = config.model_copy(update={"hub": config.hub.model_copy(update={"catalog_snapshot": False})})
    hub = Hub(unsaved, endpoint=endpoint)
    selection = hub.endpoint.selection
    settle = max((s.connect_timeout for s in config.enabled_servers().values()), default=0) + 1
    async with hub.running():
        await hub.wait_settled(settle)
        if catalog is not None:
            for kind in KINDS:
                catalog[_KIND_KEYS[kind]] = list(selection.selected(kind, hub.catalog.view(kind)))
        if visible is not None:
            principal, tools = visible
            policy = hub.policy()
            for item in hub.catalog.view("tools").items:
                target = hub.catalog.resolve("tools", item["name"])
                if target is not None and selection.visible(policy, principal, "tool", target.mount, target.native):
                    tools.append(item)
        for upstream in hub.upstreams.values():
            await upstream.sessions_ready()
        servers: dict[str, Any] = hub.health()["servers"]
        for name, report in servers.items():  # not in /healthz, which anyone who reaches the hub may read
            report["stderr"] = hub.stderr_of(name)
        return servers


def _exported(args: argparse.Namespace, config: HubConfig) -> int:
    """`tools --format`: the tools the principal may see, as the provider's tool definitions (JSON)."""
    visible: list[dict[str, Any]] = []
    health = anyio.run(_connected_hub, config, None, (args.principal, visible), args.endpoint)
    for name, report in health.items():
        if report["state"] != State.UP:
            print(f"warning: server '{name}' is {_state(report)}: {report['last_error']}", file=sys.stderr)
    try:
        print(json.dumps(export(args.format, Toolset(visible)), indent=2, ensure_ascii=False))
    except SchemaError as exc:
        raise ConfigError(config.path, "tools", f"cannot export as {args.format}: {exc}") from None
    return 1 if any(r["state"] != State.UP for r in health.values()) else 0


def _connections(args: argparse.Namespace) -> int:
    """List or revoke the people's sign-ins toward `mode = "user"` and "enterprise" mounts (credentials/user.py,
    enterprise.py), list or
    withdraw the consents they gave their MCP clients on the hub's consent page, or print a new `token_key`. A
    revoked sign-in is gone for a running hub at its next call for that person, which closes the session that
    carried it and asks them to sign in again; its tokens are revoked at the authorization server too when it
    can (credentials/revocation.py). A withdrawn consent makes that client's next sign-in ask again; the
    tokens are kept."""
    from mcp_hub.credentials.connections import StoreError, new_key, store_at

    if args.action == "key":
        print(new_key())
        return 0
    if args.action in ("revoke", "withdraw") and args.principal is None:
        print(f"error: connections {args.action} needs --principal", file=sys.stderr)
        return 2
    if args.action == "withdraw" and args.client is None:
        print(
            "error: connections withdraw needs --client (the client ID that `connections list` shows)", file=sys.stderr
        )
        return 2
    config = load_config(args.config)
    mounts = {
        name: server
        for name, server in config.servers.items()
        if server.auth.mode in ("user", "enterprise") and args.server in (None, name)
    }
    if args.server is not None and not mounts:
        print(f'error: no mode = "user" or "enterprise" server named {args.server!r} in {config.path}', file=sys.stderr)
        return 2
    if args.action in ("revoke", "withdraw"):
        with appending(config.audit_file(), sinks_of(config, rotate=False)) as audit:
            actor = _Administrator(audit, _system_user(), _policy_revision(config))
            if args.action == "revoke":
                return _revoke_connections(mounts, args.principal, actor)
            return _withdraw_consents(mounts, args.principal, args.client, actor)
    consents: list[str] = []
    try:
        for name, server in mounts.items():
            assert server.auth.token_key is not None
            store = store_at(server.auth.token_store, server.auth.token_key)
            for record in store.list(args.principal):
                if record.mount == name:
                    fields = (record.principal, name, record.issuer, _expiry(record.expires_at), record.scope or "")
                    print("\t".join(fields))
            for given in store.list_consents(args.principal):
                if given.mount == name and args.client in (None, given.client):
                    fields = (
                        given.principal,
                        name,
                        given.client,
                        _allowed(given.given_at),
                        f"{given.browsers} browser(s)",
                    )
                    consents.append("\t".join(fields))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if consents:
        print("\nclients allowed (principal, server, client, when, browsers):")
        print("\n".join(consents))
    return 0


class _Administrator:
    """Who runs `mcp-hub connections revoke` or `withdraw` (NAME the system user), and the audit log their actions
    are written to, as the admin console writes its own (`AuditEvent.revoked` and `withdrawn`, via "cli")."""

    def __init__(self, audit: AuditLog, name: str, policy_revision: str | None) -> None:
        self._audit = audit
        self.name = name
        self._revision = policy_revision

    def revoked(self, gone: Revoked) -> None:
        record = gone.connection
        self._audit.record(
            AuditEvent.revoked(
                self.name,
                principal=record.principal,
                mount=record.mount,
                issuer=record.issuer,
                message=gone.message,
                policy_revision=self._revision,
                via="cli",
            )
        )

    def withdrew(self, consent: Consent) -> None:
        self._audit.record(
            AuditEvent.withdrawn(
                self.name,
                principal=consent.principal,
                client=consent.client,
                mount=consent.mount,
                browsers=consent.browsers,
                policy_revision=self._revision,
                via="cli",
            )
        )


def _system_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in the environment or the password database (a bare container)
        return "unknown"


def _policy_revision(config: HubConfig) -> str | None:
    """The revision of the policy in effect, as the hub would load it (None: its files do not load)."""
    if not config.policy.dir:
        return empty_policy().revision
    try:
        return load_policies(config.relative(config.policy.dir)).revision
    except ConfigError:  # a broken policy file does not stop a revoke
        return None


def _withdraw_consents(mounts: dict[str, ServerConfig], principal: str, client: str, actor: _Administrator) -> int:
    """Forget that `principal` allowed `client` at `mounts`, in every browser: its next sign-in asks them again
    on the consent page. Their tokens are kept (a revoke forgets them). Each consent withdrawn is audited."""
    from mcp_hub.credentials.connections import StoreError, store_at

    withdrawn = False
    for name, server in mounts.items():
        assert server.auth.token_key is not None
        try:
            gone = store_at(server.auth.token_store, server.auth.token_key).withdraw(principal, client, name)
        except StoreError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for consent in gone:
            print(
                f"withdrawn: {principal}'s consent for {client} at {name} ({consent.browsers} browser(s)): "
                "the client's next sign-in asks again; the tokens are kept"
            )
            actor.withdrew(consent)
            withdrawn = True
    if not withdrawn:
        print(f"nothing to withdraw: no consent of {principal} for {client} on record")
    return 0


def _revoke_connections(mounts: dict[str, ServerConfig], principal: str, actor: _Administrator) -> int:
    """Forget `principal`'s sign-ins toward `mounts` and revoke their tokens at the authorization server
    (credentials/revocation.py). 1 when some could only be forgotten because the authorization server refused
    or could not be reached (a warning says which); they are forgotten all the same. Each sign-in forgotten is
    audited, with what became of its tokens."""
    from mcp_hub.credentials.connections import StoreError
    from mcp_hub.credentials.revocation import revoke

    failed = False
    for name, server in mounts.items():
        try:
            revoked = anyio.run(revoke, name, server, principal)
        except StoreError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for gone in revoked:
            print(f"revoked: {principal} at {name} ({gone.connection.issuer}): {gone.message}")
            actor.revoked(gone)
            failed = failed or gone.outcome == "failed"
    return 1 if failed else 0


def _allowed(seconds: float) -> str:
    if not seconds:
        return "allowed (time not recorded)"
    return time.strftime("allowed %Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def _expiry(expires_at: float | None) -> str:
    if expires_at is None:
        return "no expiry"
    left = expires_at - time.time()
    return f"expires in {left / 60:.0f} min" if left > 0 else "expired (refreshed at next use)"


def _pins(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    pins = config.pins_file()
    if pins is None:
        raise ConfigError(config.path, "policy.pins", "pinning is off; set pins = true in [policy]")
    store = PinStore(pins)
    shared = config.cluster.redis  # replicas keep their pins in Redis (catalog/shared_pins.py)
    if args.action == "accept" and not args.keys and not args.all:
        raise ConfigError("mcp-hub pins accept", "", "name the changes (MOUNT/TOOL ...) or pass --all")
    try:
        if shared:
            store.pins, store.pending = read_shared(shared)
        if args.action == "accept":
            keys = None if args.all else args.keys
            accepted = accept_shared(shared, keys) if shared else store.accept(keys)
    except cluster_errors() as exc:
        why = f"Redis, which keeps the replicas' pins, did not answer: {exc}"
        raise ConfigError(config.path, "cluster.redis", why) from None
    if args.action == "accept":
        unknown = sorted(set(args.keys) - set(accepted))
        for key in accepted:
            print(f"accepted {key}")
        for key in unknown:
            print(f"no pending change for {key}", file=sys.stderr)
        return 1 if unknown else 0
    print(f"{len(store.pins)} tool(s) pinned; {len(store.pending)} changed since:")
    for key, change in sorted(store.pending.items()):
        why = f"held or flagged for {change['reason']}, since" if change.get("reason") else "changed"
        if change.get("rejected"):
            why = f"rejected by {change.get('rejected_by')} at {change['rejected']}, held; changed"
        print(f"  {key}  ({why} {change['since']}; accept with: mcp-hub pins accept {key})")
    return 0


def _explain(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    policy = load_policies(config.relative(config.policy.dir)) if config.policy.dir else empty_policy()
    try:
        arguments = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise ConfigError("--args", "", f'not JSON ({exc}); pass an object like \'{{"path": "/tmp/x"}}\'') from None
    if not isinstance(arguments, dict):
        raise ConfigError("--args", "", 'must be a JSON object, like \'{"path": "/tmp/x"}\'')
    kind: Kind = "tool" if args.tool else "prompt" if args.prompt else "resource"
    mount, name = _split_target(kind, args.tool or args.prompt or args.resource)
    principal = args.principal if args.claims is None else _token_principal(config, args.claims)
    target = Target(kind, mount, name, arguments if kind != "resource" else None)
    detectors = Detectors(configured_secrets(config), config.guardrails.phone_regions(os.environ))
    usage = None
    if config.cluster.redis and kind == "tool":
        usage = anyio.run(_budget_usage, config, policy.budgets_for(principal), principal)
    print(explain(policy, principal, target, detectors=detectors, usage=usage))
    return 0


async def _budget_usage(config: HubConfig, budgets: Sequence[CompiledBudget], principal: str) -> list[Usage] | None:
    """What `principal` used of `budgets`, read from the cluster's Redis (None when it cannot be read)."""
    from mcp_hub.chain.budgets import BudgetCounter
    from mcp_hub.cluster import Cluster

    if not budgets:
        return []
    cluster = Cluster(config.cluster.redis or "", config.cluster.secret)
    try:
        usage = await BudgetCounter(cluster).usage(budgets, principal)
    finally:
        await cluster.aclose()
    if not cluster.up:
        print(f"(the budgets' counts could not be read from Redis: {cluster.last_error})", file=sys.stderr)
        return None
    return usage


def _token_principal(config: HubConfig, text: str) -> str:
    """The principal an access token with these claims would be (as the hub reads a token it has verified)."""
    if config.auth.oauth is None:
        raise ConfigError(config.path, "auth.oauth", "--claims needs [auth.oauth] (which says which claims are read)")
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("--claims", "", f"cannot read {text[1:]} ({exc.strerror}); check the path") from None
    try:
        claims = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("--claims", "", f'not JSON ({exc}); pass an object like \'{{"sub": "alice"}}\'') from None
    if not isinstance(claims, dict):
        raise ConfigError("--claims", "", 'must be a JSON object, like \'{"sub": "alice", "scope": "mcp"}\'')
    from mcp_hub.auth.verifier import identity_from_claims  # the token checks: only for [auth.oauth]

    try:
        identity = identity_from_claims(config.auth.oauth, claims)
    except Refusal as refusal:
        raise ConfigError("--claims", "", f"the hub would refuse this token: {refusal.description}") from None
    missing = [scope for scope in config.auth.oauth.scopes_required if scope not in identity.scopes]
    if missing:
        print(f"Note: the hub refuses this token (403 insufficient_scope): it lacks {', '.join(missing)}")
    return identity.principal


def _split_target(kind: str, text: str) -> tuple[str, str]:
    """`mount/name`, or a public name (`mount_name`, `mount+uri`, and the forms that keep their scheme:
    `ui://mount+page`, `skill://mount/path`)."""
    if kind == "resource" and text.startswith(("ui://", "skill://")):
        scheme, _, rest = text.partition("://")
        candidate = rest.partition("+" if scheme == "ui" else "/")[0]
        split = split_uri(text, {candidate})
        if split is not None:
            return split
    separator = "+" if kind == "resource" else "_"
    slash, plus = text.find("/"), text.find(separator)
    if plus > 0 and (slash < 0 or plus < slash):
        return text[:plus], text[plus + 1 :]
    if slash > 0:
        return text[:slash], text[slash + 1 :]
    raise ConfigError(f"--{kind}", "", f"name the mount too: MOUNT/NAME, or the public name (got {text!r})")


def _import(args: argparse.Namespace) -> int:
    from mcp_hub.importer import (  # tomlkit: only this command
        create_config,
        import_client_config,
        merge_into,
        secret_env_names,
    )

    source = Path(args.file)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(source), "", f"cannot read the file ({exc.strerror}); check the path") from None
    document = import_client_config(text, str(source))
    if args.output:
        output = Path(args.output)
        if output.exists():
            existing = output.read_text(encoding="utf-8")
            output.write_text(merge_into(existing, document, file=str(output), force=args.force), encoding="utf-8")
        else:  # a new hub.toml: with the shipped policies, pinning and the audit log on
            policies = create_config(output, document)
            if policies is not None:
                print(f"wrote {policies}{os.sep} (the default policies; see the README, Policy)", file=sys.stderr)
        print(f"wrote {output}", file=sys.stderr)
    else:
        print(document.as_string(), end="")
    names = secret_env_names(document)
    if names:
        print(f"note: export these before serving: {', '.join(names)}", file=sys.stderr)
    return 0


def _registry_url(args: argparse.Namespace) -> str:
    from mcp_hub.registry import configured_registry, registry_url

    return registry_url(args.registry, "--registry") if args.registry else configured_registry(Path(args.config))


def _add(args: argparse.Namespace) -> int:
    from mcp_hub.importer import create_config, merge_into  # tomlkit: only this command
    from mcp_hub.registry import Registry, split_reference, status
    from mcp_hub.server_card import is_url, read_card
    from mcp_hub.server_json import server_table

    if is_url(args.server):  # a remote server's card (server_card.py): a server.json of remotes only
        url, card = read_card(args.server)
        name = card.get("name") if isinstance(card.get("name"), str) else args.server
        listing: dict[str, Any] = {"server": card}
        version, state, message = "", "active", ""
    else:
        name, version = split_reference(args.server)
        url = _registry_url(args)
        with Registry(url) as registry:
            listing = registry.server(name, version)
        state, message = (shown(text) for text in status(listing))
    if state == "deleted":
        raise ConfigError(url, "", f"{args.server} is deleted from the registry ({message or 'no reason given'})")
    said = f"{state}: {message}" if message else state
    found = listing["server"].get("version")
    entry_version = shown(found) if isinstance(found, str) else version
    added = server_table(
        listing,
        where=f"{url}: {name}@{entry_version}",
        name=args.name,
        use=args.use,
        status="" if state == "active" else said,
    )
    output = Path(args.config)
    if output.exists():
        existing = output.read_text(encoding="utf-8")
        merged = merge_into(existing, added.document(), file=str(output), force=args.force)
        output.write_text(merged, encoding="utf-8")
    else:  # a new hub.toml: with the shipped policies, pinning and the audit log on
        policies = create_config(output, added.document())
        if policies is not None:
            print(f"wrote {policies}{os.sep} (the default policies; see the README, Policy)", file=sys.stderr)
    print(f"added [servers.{added.name}] to {output}: {name} {entry_version} ({added.kind})", file=sys.stderr)
    if state != "active":
        print(f"note: the registry marks this version {said}", file=sys.stderr)
    if added.required:
        print(f"note: export these before serving: {', '.join(added.required)}", file=sys.stderr)
    return 0


def _registry_search(args: argparse.Namespace) -> int:
    from mcp_hub.registry import Registry, search_table

    if args.limit < 1:
        raise ConfigError("--limit", "", f"must be 1 or more (got {args.limit})")
    url = _registry_url(args)
    with Registry(url) as registry:
        listings, more = registry.search(args.text, args.limit)
    if not listings:
        print(f"no server in {url} has {args.text!r} in its name")
        return 0
    print("\n".join(search_table(listings)))
    if more:
        print(f"(the first {len(listings)}; more with --limit, or narrow TEXT)")
    return 0

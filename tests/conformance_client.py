"""The client under test for the official MCP conformance suite's client scenarios.

The suite (npm `@modelcontextprotocol/conformance`) starts a scenario server, then runs this
command with the server's URL as its last argument and the scenario in the environment
(`MCP_CONFORMANCE_SCENARIO`, `MCP_CONFORMANCE_PROTOCOL_VERSION`, `MCP_CONFORMANCE_CONTEXT`),
and checks what the server saw. Two ways to run it:

    python -m tests.conformance_client --via direct URL   # the SDK's Client connected to URL
    python -m tests.conformance_client --via hub URL      # an in-process Hub mounting URL, and
                                                          # the SDK's Client connected to the hub

The same steps run either way, so what the scenario server sees through the hub is the hub's
own client side: its handshake or per-request `_meta`, its headers, how it answers
`input_required` and mid-call requests, its SSE reconnection. The steps are those of any
client exploring a server: list the tools and call each one (or the calls the scenario's
context names), with arguments drawn from its input schema; read every listed resource; get
every listed prompt. The client answers elicitation with the schema's defaults, sampling with
a fixed text and roots with an empty list.

With `--only SCENARIO,...` it is the client under test for those scenarios alone: run for any
other scenario of a suite the suite runs as a whole, it exits at once without connecting (the
suite records that scenario as failed, and the tests do not read it). With `--slots FOLDER`, it runs its
steps only while it holds one of the lock files in FOLDER (`flock`), waiting for one otherwise: a suite
starts all of its scenarios' clients at once, and that many hubs connecting and logging in together on a
small machine would outlast the client's own time limits.

The protocol era follows `MCP_CONFORMANCE_PROTOCOL_VERSION`, as the suite requires: the
initialize handshake up to 2025-11-25 (`mode="legacy"`, and `protocol = "legacy"` for the
hub's mount), the stateless 2026-07-28 protocol from then on. A step that fails is written to
stderr and the others still run; the exit code is 1 only when the connection itself fails.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from cryptography.fernet import Fernet
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.config import HubConfig
from mcp_hub.hub import Hub

MOUNT = "scenario"
SETTLE_SECONDS = 15.0
"""How long the hub may take to connect to the scenario server and list it."""


def _mode(protocol_version: str) -> str:
    return protocol_version if protocol_version in MODERN_PROTOCOL_VERSIONS else "legacy"


def sample(schema: Any) -> Any:
    """A value that satisfies a (simple) JSON schema: its default, its first enum value, or one of its type."""
    if not isinstance(schema, dict):
        return "conformance"
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: sample(properties.get(name)) for name in schema.get("required", [])}
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}.get(kind, "conformance")


async def elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, with every field of the requested schema at its default (SEP-1034) or a sample value."""
    if isinstance(params, types.ElicitRequestFormParams):
        properties = params.requested_schema.get("properties", {})
        return types.ElicitResult(action="accept", content={name: sample(s) for name, s in properties.items()})
    return types.ElicitResult(action="accept")


async def sampling(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="conformance answer"), model="conformance"
    )


async def roots(context: ClientRequestContext) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


class Steps:
    """The scenario's steps against a connected client; each failing step is logged, not fatal."""

    def __init__(self, client: Client, context: dict[str, Any]) -> None:
        self.client = client
        self.context = context
        self.failed = 0

    async def step(self, what: str, action: Callable[[], Awaitable[Any]]) -> Any:
        try:
            result = await action()
        except Exception:  # every failure is reported and the next step still runs
            self.failed += 1
            print(f"step failed: {what}\n{traceback.format_exc()}", file=sys.stderr)
            return None
        print(f"step done: {what}", file=sys.stderr)
        return result

    async def run(self) -> None:
        # Every list is asked for, whatever the server declared: a 2026-07-28 client pinned to its
        # version (no `server/discover`) knows no capabilities, and a refused list is a logged step.
        listed = await self.step("tools/list", self.client.list_tools)
        tools = listed.tools if listed is not None else []
        for name, arguments in self._tool_calls(tools):
            await self.step(f"tools/call {name}", lambda n=name, a=arguments: self.client.call_tool(n, a))
        resources = await self.step("resources/list", self.client.list_resources)
        for resource in resources.resources if resources is not None else []:
            uri = str(resource.uri)
            await self.step(f"resources/read {uri}", lambda u=uri: self.client.read_resource(u))
        prompts = await self.step("prompts/list", self.client.list_prompts)
        for prompt in prompts.prompts if prompts is not None else []:
            arguments = {a.name: "conformance" for a in prompt.arguments or [] if a.required}
            await self.step(
                f"prompts/get {prompt.name}", lambda p=prompt.name, a=arguments: self.client.get_prompt(p, a)
            )

    def _tool_calls(self, tools: list[types.Tool]) -> list[tuple[str, dict[str, Any]]]:
        """The calls the scenario's context names, else one call of every listed tool."""
        if "toolCalls" in self.context:
            return [(call["name"], call.get("arguments", {})) for call in self.context["toolCalls"]]
        calls = []
        for tool in tools:
            arguments = sample(tool.input_schema)
            if tool.name == "json_schema_echo":  # SEP-1613: echo another tool's input schema as it was listed
                others = [t.input_schema for t in tools if t.name != tool.name]
                arguments = {"schema": others[0] if others else {}}
            calls.append((tool.name, arguments))
        return calls


def _client(server: Any, protocol_version: str) -> Client:
    return Client(
        server,
        mode=_mode(protocol_version),  # type: ignore[arg-type]
        cache=None,
        client_info=types.Implementation(name="mcp-hub-conformance", version="1.0.0"),
        elicitation_callback=elicitation,
        sampling_callback=sampling,
        list_roots_callback=roots,
        read_timeout_seconds=20.0,
    )


def mount_auth(scenario: str, context: dict[str, Any], folder: Path) -> dict[str, Any] | None:
    """The `auth` table of the hub's mount for an `auth/*` scenario (None: another scenario).

    The client credentials scenarios get the client the context names (with its private key for private_key_jwt);
    workload identity federation, its workload token; enterprise-managed authorization, the
    identity provider, the ID token and the clients the context names (the token kept in `folder`); the others,
    the hub's own login (authorization code + PKCE, registered dynamically, or as the client the context names)."""
    if not scenario.startswith("auth/"):
        return None
    credentials = {key: context[key] for key in ("client_id", "client_secret") if key in context}
    if scenario == "auth/client-credentials-jwt":  # private_key_jwt, with the key the context gives
        method = {"token_endpoint_auth_method": "private_key_jwt", "client_key": context["private_key_pem"]}
        return {"mode": "client_credentials", **credentials, **method}
    if scenario.startswith("auth/client-credentials"):
        return {"mode": "client_credentials", **credentials}
    if scenario == "auth/wif-jwt-bearer":  # the workload's token the context gives, as a public client
        return {
            "mode": "workload",
            **credentials,
            "assertion": context["valid_jwt"],
            "token_endpoint_auth_method": "none",
        }
    if scenario == "auth/enterprise-managed-authorization":
        return {
            "mode": "enterprise",
            **credentials,
            "idp_issuer": context["idp_issuer"],
            "idp_client_id": context["idp_client_id"],
            "id_token": context["idp_id_token"],
            "token_key": Fernet.generate_key().decode(),
            "token_store": str(folder / "connections"),
        }
    if scenario == "auth/basic-cimd":  # the client ID metadata document URL the scenario expects of its client
        credentials["client_metadata_url"] = "https://conformance-test.local/client-metadata.json"
    return {"mode": "authorization_code", **credentials}


@asynccontextmanager
async def connect(
    via: str, url: str, protocol_version: str, hub_protocol: str | None = None, auth: dict[str, Any] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client, connected to `url` directly or to an in-process hub that mounts it (with `auth` as
    the mount's auth table, for an `auth/*` scenario)."""
    if via == "direct":
        async with _client(url, protocol_version) as client:
            yield client
        return
    mount = {
        "url": url,
        "transport": "streamable-http",
        "prefix": False,
        "protocol": hub_protocol or ("legacy" if _mode(protocol_version) == "legacy" else protocol_version),
        "timeout": 20.0,
    }
    if auth is not None:
        mount["auth"] = auth
    config = HubConfig.model_validate({"hub": {"log_level": "warning"}, "servers": {MOUNT: mount}})
    hub = Hub(config)
    async with hub.running():
        await hub.wait_settled(SETTLE_SECONDS)
        async with _client(hub.endpoint.server, protocol_version) as client:
            yield client


_held: list[Any] = []
"""The lock file this process holds (open until it exits)."""


async def hold_a_slot(folder: Path) -> None:
    """Wait until this process holds one of the lock files in `folder`; it holds it until it exits."""
    paths = sorted(folder.iterdir())
    while True:
        for path in paths:
            handle = path.open("rb")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            _held.append(handle)
            return
        await anyio.sleep(0.1)


async def main(
    via: str,
    url: str,
    hub_protocol: str | None = None,
    only: frozenset[str] | None = None,
    slots: Path | None = None,
) -> int:
    protocol_version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if only is not None and scenario not in only:
        print(f"scenario {scenario!r} is not one of --only: not run", file=sys.stderr)
        return 0
    if slots is not None:
        await hold_a_slot(slots)
    print(f"scenario {scenario!r} at {protocol_version} via {via}: {url}", file=sys.stderr)
    with anyio.fail_after(60), tempfile.TemporaryDirectory(prefix="mcp-hub-conformance-") as folder:
        auth = mount_auth(scenario, context, Path(folder))
        async with connect(via, url, protocol_version, hub_protocol, auth) as client:
            steps = Steps(client, context)
            await steps.run()
    print(f"{steps.failed} step(s) failed", file=sys.stderr)
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--via", choices=("direct", "hub"), required=True)
    parser.add_argument(
        "--hub-protocol",
        choices=("auto", "legacy", "2026-07-28"),
        help="the hub mount's `protocol` (default: the era of MCP_CONFORMANCE_PROTOCOL_VERSION)",
    )
    parser.add_argument(
        "--only",
        type=lambda names: frozenset(names.split(",")),
        help="the scenarios (comma-separated) to run the steps for; for any other, exit at once",
    )
    parser.add_argument("--slots", type=Path, help="a folder of lock files: run the steps holding one of them")
    parser.add_argument("url", help="the scenario server's MCP URL (the suite appends it)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        return anyio.run(main, args.via, args.url, args.hub_protocol, args.only, args.slots)
    except Exception:  # the connection failed: the suite records the exit code and this traceback
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(cli())

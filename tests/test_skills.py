"""Skills (SEP-2640, `io.modelcontextprotocol/skills`) through the hub, against direct connections to the same servers.

Two skill servers (`tests/servers/skills.py`, serving `tests/data/skills/docs` as a stdio child, one skill a page,
and `tests/data/skills/ops` in-process over streamable HTTP) mounted in one hub; the SDK's `Client` discovers the
extension where the hub declares it, pages through `skills/list`, checks each entry against the server's own
(the URIs in the hub's form, the rest identical), reads every file of every skill through the hub and checks its
bytes against the server's, and the digest and size in the entry, in both protocol eras. The SDK has no typed
skills API, so its session sends the extension's requests with raw params.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import TypeAdapter

from mcp_hub.config import load_config, parse_config
from mcp_hub.errors import ConfigError, InvalidCursor
from mcp_hub.hub import Hub
from mcp_hub.live import folder_signature
from mcp_hub.server.http import build_app
from mcp_hub.server.skills import Cursors, merge_meta, skills_settings
from mcp_hub.skills_server import FolderSkills
from mcp_hub.skills_server import build_server as skills_server
from tests.conftest import ROOT, hub_client, module_server, running_hub, script_server, serve_app, write_config
from tests.harness.venvs import interpreter, python_with
from tests.servers.skills import DATA, SKILLS, build_server

pytestmark = pytest.mark.anyio
slow = pytest.mark.slow  # each hub starts a skill server as a stdio child; the conformance suite runs on node

SERVER = str(ROOT / "tests" / "servers" / "skills.py")
_RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


async def send(client: Client, method: str, **params: Any) -> dict[str, Any]:
    return await client.session.send_request(types.Request[dict[str, Any], str](method=method, params=params), _RAW)


async def listing(client: Client) -> tuple[list[dict[str, Any]], int]:
    """Every entry of `skills/list`, page after page, and how many pages it took."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await send(client, "skills/list", **({"cursor": cursor} if cursor else {}))
        pages += 1
        entries += page["skills"]
        cursor = page.get("nextCursor")
        if not cursor:
            return entries, pages


async def declared(client: Client, mode: str) -> dict[str, Any]:
    """The extensions the server declared: in its `initialize` answer, or its `server/discover` one."""
    if mode == "legacy":
        return dict(client.server_capabilities.extensions or {})
    discovered = await client.session.send_discover("2026-07-28")
    return dict(discovered["capabilities"].get("extensions") or {})


def page_meta(page: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 page's `_meta` but the identity stamp of who answered (through the hub, the hub's own)."""
    meta = dict(page.get("_meta") or {})
    assert meta.pop("io.modelcontextprotocol/serverInfo", {"name": "mcp-hub"})["name"] == "mcp-hub"
    return meta


def body(contents: dict[str, Any]) -> bytes:
    return contents["text"].encode() if "text" in contents else base64.b64decode(contents["blob"])


def public(mount: str, uri: str) -> str:
    return "skill://" + mount + "/" + uri.removeprefix("skill://")


def in_hub_form(mount: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A server's entry as the hub should show it: every URI with the mount in it, the rest as it is."""
    files = [{**f, "uri": public(mount, f["uri"])} for f in entry["resources"]]
    return {**entry, "uri": public(mount, entry["uri"]), "resources": files}


@asynccontextmanager
async def skills_hub(tmp_path: Path, policy: str | None = None, extra: str = "") -> AsyncIterator[Hub]:
    """A hub mounting `docs` (stdio, a skill a page) and `ops` (streamable HTTP), with `policy` as its policy file and
    `extra` added to its hub.toml."""
    async with serve_app(build_server(DATA / "ops", name="ops").streamable_http_app()) as ops:
        servers = {
            "docs": script_server(SERVER, str(DATA / "docs"), "--page", "1"),
            "ops": {"url": f"{ops}/mcp", "transport": "streamable-http"},
        }
        path = write_config(tmp_path / "hub.toml", servers)
        if policy is not None:
            (tmp_path / "policies").mkdir()
            (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(policy), encoding="utf-8")
            with path.open("a", encoding="utf-8") as file:
                file.write('\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n')
        with path.open("a", encoding="utf-8") as file:
            file.write(textwrap.dedent(extra))
        async with running_hub(load_config(path)) as hub:
            yield hub


@slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_two_mounts_skills_are_listed_got_and_read_byte_identical_to_direct(tmp_path: Path, mode: str) -> None:
    async with (
        skills_hub(tmp_path) as hub,
        hub_client(hub, mode) as client,
        Client(build_server(DATA / "docs"), mode=mode, cache=None) as docs,
        Client(build_server(DATA / "ops"), mode=mode, cache=None) as ops,
    ):
        assert (await declared(client, mode))[SKILLS] == {"directoryRead": True}
        entries, pages = await listing(client)
        direct = {"docs": (await listing(docs))[0], "ops": (await listing(ops))[0]}
        expected = [in_hub_form(mount, e) for mount in ("docs", "ops") for e in direct[mount]]
        assert entries == expected
        assert [e["frontmatter"]["name"] for e in entries] == [
            "refunds",
            "pdf-processing",
            "git-workflow",
            "release-notes",
        ]
        assert pages == 3  # docs serves a skill a page (two pages), ops both of its own on one
        assert entries[0]["uri"] == "skill://docs/acme/billing/refunds/SKILL.md"
        assert entries[2]["frontmatter"]["allowed-tools"] == "Bash(git:*)"  # frontmatter as the author wrote it
        for entry in entries:
            mount = entry["uri"].split("/")[2]
            server = docs if mount == "docs" else ops
            for file in entry["resources"]:
                native = "skill://" + file["uri"].split("/", 3)[3]
                through = (await send(client, "resources/read", uri=file["uri"]))["contents"]
                straight = (await send(server, "resources/read", uri=native))["contents"]
                assert [body(c) for c in through] == [body(c) for c in straight]
                assert [c["uri"] for c in through] == [file["uri"]]
                data = body(through[0])
                assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
            got = await send(client, "skills/get", uri=entry["uri"])
            native = "skill://" + entry["uri"].split("/", 3)[3]
            assert got["skill"] == in_hub_form(mount, (await send(server, "skills/get", uri=native))["skill"])
        # A binary file and CRLF text arrive as they are on disk.
        logo = await send(client, "resources/read", uri="skill://ops/git-workflow/assets/logo.png")
        assert body(logo["contents"][0]) == (DATA / "ops" / "git-workflow" / "assets" / "logo.png").read_bytes()
        email = await send(client, "resources/read", uri="skill://docs/acme/billing/refunds/examples/email.md")
        assert body(email["contents"][0]).count(b"\r\n") == 3
        # A folder of a skill, its children in the hub's form.
        folder = await send(client, "resources/directory/read", uri="skill://docs/pdf-processing/templates")
        assert folder["resources"] == [
            {
                "uri": "skill://docs/pdf-processing/templates/invoice.md",
                "name": "invoice.md",
                "mimeType": "text/markdown",
            },
            {
                "uri": "skill://docs/pdf-processing/templates/regional",
                "name": "regional",
                "mimeType": "inode/directory",
            },
        ]
        # The skill files are resources too, listed with the hub's URIs.
        uris = {r.uri for r in (await client.list_resources()).resources}
        assert "skill://docs/pdf-processing/SKILL.md" in uris and "skill://ops/git-workflow/assets/logo.png" in uris


@slow
async def test_unknown_skills_folders_and_cursors_are_invalid_params(tmp_path: Path) -> None:
    async with skills_hub(tmp_path) as hub, hub_client(hub, "2026-07-28") as client:
        refusals = []
        for method, params in [
            ("skills/get", {"uri": "skill://docs/no-such-skill/SKILL.md"}),
            ("skills/get", {"uri": "skill://nowhere/pdf-processing/SKILL.md"}),
            ("skills/get", {"uri": "skill://docs/pdf-processing/templates/invoice.md"}),
            ("resources/directory/read", {"uri": "skill://docs/pdf-processing/SKILL.md"}),
            ("resources/directory/read", {"uri": "skill://docs/acme"}),
            ("skills/list", {"cursor": "not-a-cursor"}),
            ("skills/list", {"cursor": base64.urlsafe_b64encode(b'{"m":"nowhere","c":null}').decode().rstrip("=")}),
        ]:
            with pytest.raises(MCPError) as refused:
                await send(client, method, **params)
            refusals.append((refused.value.error.code, refused.value.error.message))
        assert refusals == [
            (INVALID_PARAMS, "No skill is served at skill://no-such-skill/SKILL.md"),
            (INVALID_PARAMS, "Unknown resource: skill://nowhere/pdf-processing/SKILL.md"),
            (INVALID_PARAMS, "No skill is served at skill://pdf-processing/templates/invoice.md"),
            (INVALID_PARAMS, "skill://pdf-processing/SKILL.md is not a directory resource"),
            (INVALID_PARAMS, "skill://acme is not a directory resource"),
            (INVALID_PARAMS, "Invalid cursor: 'not-a-cursor'; start again without a cursor"),
            (INVALID_PARAMS, refusals[-1][1]),
        ]
        assert refusals[-1][1].startswith("Invalid cursor")


@slow  # ~1 s: a hub with a stdio server and one over HTTP
async def test_a_cursor_is_opaque_and_one_for_a_mount_the_caller_does_not_list_is_invalid(tmp_path: Path) -> None:
    async with (
        skills_hub(tmp_path, extra='\n[endpoints.ops-only]\nservers = ["ops"]\n') as hub,
        hub_client(hub, "2026-07-28") as client,
        Client(hub.endpoints["ops-only"].server, mode="2026-07-28", cache=None) as ops_only,
    ):
        first = await send(client, "skills/list")
        cursor = first["nextCursor"]  # docs serves a skill a page: the cursor resumes at docs' second page
        assert "docs" not in cursor and b"docs" not in base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        # The page's _meta is its server's (the identity stamp the hub's own, as on every 2026-07-28 answer).
        assert page_meta(first) == {"example.com/folder": "docs", "example.com/index": "tests"}
        # At the endpoint that lists ops only: the main endpoint's cursor, and one sealed with this endpoint's own
        # key naming docs (which it does not list), answer as a cursor the hub never gave.
        sealer = hub.endpoints["ops-only"].skill_cursors
        for given in (cursor, sealer.seal("docs", "1", "stdio", "ops-only")):
            with pytest.raises(MCPError) as refused:
                await send(ops_only, "skills/list", cursor=given)
            assert refused.value.error.code == INVALID_PARAMS
            assert refused.value.error.message.startswith("Invalid cursor")
        assert [e["uri"] for e in (await listing(ops_only))[0]] == [
            "skill://ops/git-workflow/SKILL.md",
            "skill://ops/release-notes/SKILL.md",
        ]
        resumed = await send(ops_only, "skills/list", cursor=sealer.seal("ops", None, "stdio", "ops-only"))
        assert len(resumed["skills"]) == 2


POLICY = """
[principals]
stdio = "reader"

[profiles.reader]
default = "deny"
[[profiles.reader.rules]]
id = "pdf-only"
effect = "allow"
resources = ["docs/skill://pdf-processing/*"]
"""


@slow
async def test_a_policy_shows_only_the_skills_its_profile_may_read_and_audits_each_get(tmp_path: Path) -> None:
    async with skills_hub(tmp_path, POLICY) as hub, hub_client(hub, "2026-07-28") as client:
        entries, _ = await listing(client)
        assert [e["uri"] for e in entries] == ["skill://docs/pdf-processing/SKILL.md"]
        got = await send(client, "skills/get", uri="skill://docs/pdf-processing/SKILL.md")
        assert got["skill"]["frontmatter"]["name"] == "pdf-processing"
        invoice = await send(client, "resources/read", uri="skill://docs/pdf-processing/templates/invoice.md")
        assert body(invoice["contents"][0]) == (DATA / "docs/pdf-processing/templates/invoice.md").read_bytes()
        hidden = []
        for method, uri in [
            ("skills/get", "skill://docs/acme/billing/refunds/SKILL.md"),
            ("skills/get", "skill://ops/git-workflow/SKILL.md"),
            ("resources/read", "skill://ops/git-workflow/SKILL.md"),
        ]:
            with pytest.raises(MCPError) as refused:
                await send(client, method, uri=uri)
            hidden.append((refused.value.error.code, refused.value.error.message))
        # Hidden is unknown: answered as a resource that does not exist is, not as one forbidden.
        assert hidden == [
            (INVALID_PARAMS, "Unknown resource: skill://docs/acme/billing/refunds/SKILL.md"),
            (INVALID_PARAMS, "Unknown resource: skill://ops/git-workflow/SKILL.md"),
            (INVALID_PARAMS, "Unknown resource: skill://ops/git-workflow/SKILL.md"),
        ]
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    gets = [(line["mount"], line["name"], line["outcome"]) for line in lines if line["method"] == "skills/get"]
    assert gets == [
        ("docs", "skill://pdf-processing/SKILL.md", "allowed"),
        ("docs", "skill://acme/billing/refunds/SKILL.md", "denied"),
        ("ops", "skill://git-workflow/SKILL.md", "denied"),
    ]


OPS_POLICY = """
[principals]
stdio = "reader"

[profiles.reader]
default = "deny"
[[profiles.reader.rules]]
id = "git-only"
effect = "allow"
resources = ["ops/skill://git-workflow/*"]
"""


@slow
async def test_a_page_made_of_several_servers_pages_keeps_the_meta_they_agree_on(tmp_path: Path) -> None:
    """docs' two pages show nothing to this profile: the hub's first page is made of them and ops' page, whose
    `_meta` name other folders; the key they all give alike is kept."""
    async with skills_hub(tmp_path, OPS_POLICY) as hub, hub_client(hub, "2026-07-28") as client:
        page = await send(client, "skills/list")
    assert [e["uri"] for e in page["skills"]] == ["skill://ops/git-workflow/SKILL.md"]
    assert page_meta(page) == {"example.com/index": "tests"}
    assert "nextCursor" not in page


# --- the conformance suite's skills scenarios ------------------------------------------------------------------------

NPM = ROOT / "tests" / "npm" / "node_modules"
SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory")


async def conformance(url: str, version: str, output: Path) -> dict[str, str]:
    """The skills scenarios of the conformance suite (0.2.0-alpha.12) against `url` at `version`: check id -> status."""
    statuses: dict[str, str] = {}
    for scenario in SCENARIOS:
        command = [str(NPM / ".bin" / "node"), str(NPM / "conformance-next" / "dist" / "index.js"), "server"]
        command += ["--url", url, "--scenario", scenario, "--spec-version", version, "--force"]
        with anyio.fail_after(120):
            await anyio.run_process([*command, "-o", str(output / version)], check=False)
    for checks in (output / version).glob("server-sep-2640-*/checks.json"):
        statuses |= {c["id"]: c["status"] for c in json.loads(checks.read_text(encoding="utf-8"))}
    return statuses


@slow
async def test_the_conformance_suites_skills_scenarios_pass_through_the_hub_in_both_eras(tmp_path: Path) -> None:
    """Every check passes directly (2026-07-28: the SDK's server declares no extension to a handshake-era client)
    and through the hub, which declares it to both eras; the skill names the hub's URIs end in included."""
    async with (
        serve_app(build_server(DATA / "docs").streamable_http_app()) as docs,
        serve_app(build_server(DATA / "ops").streamable_http_app()) as ops,
    ):
        direct = await conformance(f"{docs}/mcp", "2026-07-28", tmp_path / "direct")
        servers = {
            name: {"url": f"{url}/mcp", "transport": "streamable-http"} for name, url in (("docs", docs), ("ops", ops))
        }
        async with running_hub(load_config(write_config(tmp_path / "hub.toml", servers))) as hub:
            app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
            async with serve_app(app) as base:
                through = {
                    v: await conformance(f"{base}/mcp", v, tmp_path / "hub") for v in ("2025-11-25", "2026-07-28")
                }
    for statuses in (direct, *through.values()):
        assert "FAILURE" not in statuses.values(), statuses
        for check in (
            "sep-2640-final-segment-equals-name",
            "sep-2640-skills-list-pagination",
            "sep-2640-resources-complete",
        ):
            assert statuses[check] == "SUCCESS", (check, statuses)
        assert statuses["sep-2640-directory-read-subdir-mimetype"] == "SUCCESS"
    assert through["2026-07-28"]["sep-2640-skills-list-cache-attributes"] == "SUCCESS"
    assert through["2025-11-25"]["sep-2640-skills-list-cache-attributes"] == "SKIPPED"  # defined from 2026-07-28 on


# --- pure parts ------------------------------------------------------------------------------------------------------


def test_the_hubs_settings_read_folders_when_any_mount_does() -> None:
    assert skills_settings([None, None]) is None
    assert skills_settings([{}, None]) == {"directoryRead": False}
    assert skills_settings([{}, {"directoryRead": True}, {"directoryRead": "yes"}]) == {"directoryRead": True}
    assert skills_settings([True, None]) is None  # not settings: as if not declared


def test_a_listing_cursor_is_sealed_for_its_caller_and_endpoint_and_nothing_else_opens() -> None:
    cursors = Cursors()
    for mount, inner in [("docs", None), ("docs", "2"), ("ops", "opaque=+/")]:
        sealed = cursors.seal(mount, inner, "alice", None)
        assert cursors.open(sealed, "alice", None) == (mount, inner)
        # Opaque: neither the mount nor the server's cursor can be read in it, even decoded.
        decoded = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
        assert mount.encode() not in decoded and mount not in sealed
        for caller, endpoint in [("bob", None), ("alice", "pdf")]:  # another caller, another endpoint
            with pytest.raises(InvalidCursor):
                cursors.open(sealed, caller, endpoint)
    sealed = cursors.seal("docs", None, "alice", None)
    forged = [
        "",
        "not base64!",
        base64.urlsafe_b64encode(b'{"m":"docs","c":null}').decode().rstrip("="),  # the hub's former, readable form
        sealed[:-2] + ("AA" if not sealed.endswith("AA") else "BB"),  # altered
        Cursors().seal("docs", None, "alice", None),  # another hub's (another key)
    ]
    for cursor in forged:
        with pytest.raises(InvalidCursor):
            cursors.open(cursor, "alice", None)
    # The replicas' shared key seals from then on; what the old key sealed still opens.
    cursors.use_key(b"k" * 32)
    assert cursors.open(sealed, "alice", None) == ("docs", None)
    other = Cursors()
    other.use_key(b"k" * 32)
    assert other.open(cursors.seal("ops", "1", "alice", None), "alice", None) == ("ops", "1")


def test_the_meta_of_merged_pages_keeps_each_key_the_pages_agree_on() -> None:
    assert merge_meta([]) is None and merge_meta([None, "x"]) is None
    assert merge_meta([{"a": 1}]) == {"a": 1}
    assert merge_meta([{"a": 1, "b": 2}, None, {"a": 1, "c": 3}]) == {"a": 1, "b": 2, "c": 3}
    assert merge_meta([{"a": 1, "b": 2}, {"a": 9}]) == {"b": 2}  # two values for "a": neither describes the page
    assert merge_meta([{"a": 1}, {"a": 2}]) is None


# --- mcp-hub-skills: a folder of skills served by the hub's own server -----------------------------------------------


def skill(folder: Path, text: str, **files: bytes) -> None:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    for name, data in files.items():
        (folder / name).write_bytes(data)


def team_folder(root: Path) -> Path:
    """A folder with three good skills (one nested, one with a binary file, a hidden one and byte code, one with a link
    out of the folder) and four it must leave out."""
    skill(
        root / "deploy",
        "---\nname: deploy\ndescription: Ship a release\n---\n# Deploy\n",
        **{"run.sh": b"#!/bin/sh\r\n"},
    )
    skill(root / "team/review", "---\nname: review\ndescription: Review a change\nlicense: MIT\n---\nBody\n")
    (root / "deploy" / "logo.bin").write_bytes(bytes(range(256)))
    (root / "deploy" / ".secret").write_text("never served", encoding="utf-8")
    (root / "deploy" / "__pycache__").mkdir()
    (root / "deploy" / "__pycache__" / "run.cpython-311.pyc").write_bytes(b"\x00")
    skill(root / "plain", "# No frontmatter\n")
    skill(root / "renamed", "---\nname: other\ndescription: x\n---\n")
    skill(root / "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n")
    skill(root / "undescribed", "---\nname: undescribed\n---\n")
    (root / "outside.md").write_text("outside", encoding="utf-8")
    skill(root / "linked", "---\nname: linked\ndescription: A link out\n---\n")
    (root / "linked" / "escape.md").symlink_to(root.parent / "outside.md")
    (root / "outside.md").rename(root.parent / "outside.md")  # the link now leads out of the folder
    return root


@slow  # ~0.5 s
async def test_the_hubs_skills_server_serves_a_folder_and_says_what_it_leaves_out(tmp_path: Path) -> None:
    warned: list[str] = []
    root = team_folder(tmp_path / "skills")
    skills = FolderSkills(root, warned.append)
    assert [s.uri for s in skills.skills] == [
        "skill://deploy/SKILL.md",
        "skill://linked/SKILL.md",
        "skill://team/review/SKILL.md",
    ]
    assert [w.split(":")[0] for w in warned] == [
        "Bad_Name/SKILL.md",
        "plain/SKILL.md",
        "renamed/SKILL.md",
        "undescribed/SKILL.md",
    ]
    assert "rename the folder" in warned[0]
    assert "write name: renamed" in warned[2] and "write description" in warned[3]
    async with Client(skills_server(root), mode="2026-07-28", cache=None) as client:
        entries, _ = await listing(client)
        deploy = entries[0]
        assert deploy["frontmatter"] == {"name": "deploy", "description": "Ship a release"}
        assert [f["uri"] for f in deploy["resources"]] == [
            "skill://deploy/SKILL.md",
            "skill://deploy/logo.bin",
            "skill://deploy/run.sh",
        ]
        assert [f["uri"] for f in entries[1]["resources"]] == ["skill://linked/SKILL.md"]  # its link leads out
        for entry in entries:
            for file in entry["resources"]:
                data = body((await send(client, "resources/read", uri=file["uri"]))["contents"][0])
                assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
                assert data == (root / file["uri"].removeprefix("skill://")).read_bytes()
        assert (await send(client, "skills/get", uri="skill://team/review/SKILL.md"))["skill"] == entries[2]
        folder = await send(client, "resources/directory/read", uri="skill://deploy")
        assert [(r["name"], r["mimeType"]) for r in folder["resources"]] == [
            ("SKILL.md", "text/markdown"),
            ("logo.bin", "application/octet-stream"),
            ("run.sh", "text/x-shellscript"),
        ]
        for method, uri in [("skills/get", "skill://plain/SKILL.md"), ("resources/directory/read", "skill://team")]:
            with pytest.raises(MCPError) as refused:
                await send(client, method, uri=uri)
            assert refused.value.error.code == INVALID_PARAMS


@slow
async def test_the_hubs_skills_server_passes_the_conformance_scenarios_through_the_hub(tmp_path: Path) -> None:
    """`mcp-hub-skills` over stdio, mounted as its docs say, through the hub at both eras."""
    servers = {"team": module_server("mcp_hub.skills_server", str(DATA / "docs"))}
    async with running_hub(load_config(write_config(tmp_path / "hub.toml", servers))) as hub:
        app = build_app(hub.endpoint.server, host="127.0.0.1", path="/mcp", health=hub.health)
        async with serve_app(app) as base:
            through = {v: await conformance(f"{base}/mcp", v, tmp_path / "hub") for v in ("2025-11-25", "2026-07-28")}
    for statuses in through.values():
        assert "FAILURE" not in statuses.values(), statuses
        assert "WARNING" not in statuses.values(), statuses
        assert statuses["sep-2640-final-segment-equals-name"] == "SUCCESS"
        assert statuses["sep-2640-directory-read-subdir-mimetype"] == "SUCCESS"


@slow  # ~2 s: two servers over HTTP and a hub
async def test_a_curated_endpoint_lists_the_skills_it_selects_and_a_failing_mount_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        serve_app(build_server(DATA / "docs").streamable_http_app()) as docs,
        serve_app(build_server(DATA / "ops", broken=True).streamable_http_app()) as broken,
    ):
        servers = {"docs": {"url": f"{docs}/mcp"}, "broken": {"url": f"{broken}/mcp"}}
        path = write_config(tmp_path / "hub.toml", servers)
        with path.open("a", encoding="utf-8") as file:
            file.write('\n[endpoints.pdf]\nresources = ["docs/skill://pdf-processing/*"]\n')
        async with running_hub(load_config(path)) as hub:
            async with hub_client(hub, "2026-07-28") as client:
                everything, _ = await listing(client)
            async with Client(hub.endpoints["pdf"].server, mode="2026-07-28", cache=None) as client:
                selected, _ = await listing(client)
                with pytest.raises(MCPError) as unselected:
                    await send(client, "skills/get", uri="skill://docs/acme/billing/refunds/SKILL.md")
    assert [e["uri"] for e in everything] == [
        "skill://docs/acme/billing/refunds/SKILL.md",
        "skill://docs/pdf-processing/SKILL.md",
    ]
    assert [e["uri"] for e in selected] == ["skill://docs/pdf-processing/SKILL.md"]
    assert unselected.value.error.code == INVALID_PARAMS
    assert any("broken answered no listing" in r.getMessage() for r in caplog.records)


@slow  # ~0.5 s: a hub with the shipped policies and a server over HTTP
async def test_the_shipped_guardrails_leave_entries_and_files_as_the_server_sent_them(tmp_path: Path) -> None:
    """A new hub.toml's policies redact secrets from results: 64 hex digits of a digest are not one."""
    shutil.copytree(ROOT / "mcp_hub" / "defaults" / "policies", tmp_path / "policies")
    async with (
        serve_app(build_server(DATA / "docs").streamable_http_app()) as docs,
        Client(build_server(DATA / "docs"), mode="2026-07-28", cache=None) as direct,
    ):
        path = write_config(tmp_path / "hub.toml", {"docs": {"url": f"{docs}/mcp"}})
        with path.open("a", encoding="utf-8") as file:
            file.write('\n[policy]\ndir = "policies"\n')
        async with running_hub(load_config(path)) as hub, hub_client(hub, "2026-07-28") as client:
            # The guard on results applies to what the local user reads of this mount's skills.
            assert hub.policy().guarding("stdio", "resource", "docs", "skill://pdf-processing/SKILL.md", "results")
            entries, _ = await listing(client)
            assert entries == [in_hub_form("docs", e) for e in (await listing(direct))[0]]
            for entry in entries:
                got = await send(client, "skills/get", uri=entry["uri"])
                assert got["skill"] == entry
                for file in entry["resources"]:
                    data = body((await send(client, "resources/read", uri=file["uri"]))["contents"][0])
                    assert "sha256:" + hashlib.sha256(data).hexdigest() == file["digest"]


# --- a third-party implementation: PyPI's agentskills-mcp-server ---------------------------------------------------

AGENTSKILLS = ROOT / "tests" / ".venv-agentskills"
AGENTSKILLS_REQUIREMENTS = ROOT / "tests" / "servers" / "agentskills-requirements.txt"


@pytest.fixture(scope="module")
def agentskills_python() -> Path:
    """The Python of agentskills-mcp-server (pinned in tests/servers/agentskills-requirements.txt; it needs 3.12)."""
    base = interpreter("3.12") or interpreter("3.13")
    if base is None:
        pytest.skip("agentskills-mcp-server needs a Python 3.12 or later, and none is installed (python3.12)")
    return python_with(AGENTSKILLS, AGENTSKILLS_REQUIREMENTS, base)


@slow
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_third_party_skills_server_through_the_hub_is_as_direct(
    tmp_path: Path, mode: str, agentskills_python: Path
) -> None:
    """agentskills-mcp-server 0.7.0 over stdio, serving two of the tests' skills, beside the tests' own server:
    its listing, entries and files through the hub are its own, the URIs in the hub's form."""
    config = tmp_path / "agentskills.json"
    skills = [("pdf-processing", DATA / "docs"), ("git-workflow", DATA / "ops")]
    config.write_text(
        json.dumps(
            {
                "name": "agentskills",
                "skills": [{"id": i, "provider": "fs", "options": {"root": str(root)}} for i, root in skills],
            }
        ),
        encoding="utf-8",
    )
    command = {"command": str(agentskills_python), "args": ["-m", "agentskills_mcp_server", "--config", str(config)]}
    async with serve_app(build_server(DATA / "docs").streamable_http_app()) as docs:
        servers = {"agent": command, "docs": {"url": f"{docs}/mcp"}}
        direct_server = StdioServerParameters(command=command["command"], args=command["args"])
        async with (
            running_hub(load_config(write_config(tmp_path / "hub.toml", servers))) as hub,
            hub_client(hub, mode) as client,
            Client(stdio_client(direct_server), mode="2026-07-28", cache=None) as direct,
        ):
            assert SKILLS in await declared(client, mode)
            entries, _ = await listing(client)
            own, _ = await listing(direct)
            assert [e["frontmatter"]["name"] for e in own] == ["git-workflow", "pdf-processing"]
            assert entries[: len(own)] == [in_hub_form("agent", e) for e in own]
            assert [e["uri"] for e in entries[len(own) :]] == [
                "skill://docs/acme/billing/refunds/SKILL.md",
                "skill://docs/pdf-processing/SKILL.md",
            ]
            for entry, native in zip(entries, own, strict=False):
                got = await send(client, "skills/get", uri=entry["uri"])
                assert got["skill"] == in_hub_form(
                    "agent", (await send(direct, "skills/get", uri=native["uri"]))["skill"]
                )
                for file, native_file in zip(entry["resources"], native["resources"], strict=True):
                    through = body((await send(client, "resources/read", uri=file["uri"]))["contents"][0])
                    straight = body((await send(direct, "resources/read", uri=native_file["uri"]))["contents"][0])
                    assert through == straight
                    assert (len(through), "sha256:" + hashlib.sha256(through).hexdigest()) == (
                        file["size"],
                        file["digest"],
                    )


# --- [skills] folder: the hub serves a folder of skills itself -------------------------------------------------------

TEAM_POLICY = """
[principals]
stdio = "reader"

[profiles.reader]
default = "deny"
[[profiles.reader.rules]]
id = "deploy-only"
effect = "allow"
resources = ["team/skill://deploy/*"]
"""


@slow  # ~2 s: the hub starts mcp-hub-skills (in its sandbox, where there is one) and a server over HTTP
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_a_skills_folder_in_hub_toml_is_served_beside_the_servers_skills(tmp_path: Path, mode: str) -> None:
    """`[skills] folder` (relative to hub.toml) is a mount of its own: listed after the servers' skills, each entry,
    `skills/get`, folder read and file as `mcp-hub-skills` serves them directly, in the hub's form."""
    root = team_folder(tmp_path / "team-skills")
    async with (
        serve_app(build_server(DATA / "docs").streamable_http_app()) as docs,
        Client(skills_server(root), mode=mode, cache=None) as direct,
    ):
        path = write_config(tmp_path / "hub.toml", {"docs": {"url": f"{docs}/mcp"}})
        with path.open("a", encoding="utf-8") as file:
            file.write('\n[skills]\nfolder = "team-skills"\nmount = "team"\n')
        config = load_config(path)
        assert config.servers["team"].args == ("--name", "team", str(root))
        assert config.servers["team"].sandbox is not None and config.servers["team"].sandbox.read == (str(root),)
        async with running_hub(config) as hub, hub_client(hub, mode) as client:
            assert (await declared(client, mode))[SKILLS] == {"directoryRead": True}
            entries, _ = await listing(client)
            own, _ = await listing(direct)
            assert [e["uri"] for e in entries[:2]] == [
                "skill://docs/acme/billing/refunds/SKILL.md",
                "skill://docs/pdf-processing/SKILL.md",
            ]
            assert entries[2:] == [in_hub_form("team", e) for e in own]
            for entry in entries[2:]:
                native = "skill://" + entry["uri"].split("/", 3)[3]
                got = await send(client, "skills/get", uri=entry["uri"])
                assert got["skill"] == in_hub_form("team", (await send(direct, "skills/get", uri=native))["skill"])
                for file in entry["resources"]:
                    data = body((await send(client, "resources/read", uri=file["uri"]))["contents"][0])
                    assert data == (root / file["uri"].removeprefix("skill://team/")).read_bytes()
                    assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (file["size"], file["digest"])
            folder = await send(client, "resources/directory/read", uri="skill://team/deploy")
            assert [r["uri"] for r in folder["resources"]] == [
                "skill://team/deploy/SKILL.md",
                "skill://team/deploy/logo.bin",
                "skill://team/deploy/run.sh",
            ]


@slow  # ~1.5 s: a hub starting mcp-hub-skills
async def test_a_skills_folders_skills_are_under_the_policy_and_audited_as_a_servers(tmp_path: Path) -> None:
    team_folder(tmp_path / "skills")
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "hub.toml").write_text(textwrap.dedent(TEAM_POLICY), encoding="utf-8")
    path = tmp_path / "hub.toml"
    path.write_text(
        '[skills]\nfolder = "skills"\nmount = "team"\n\n[policy]\ndir = "policies"\n\n[audit]\nfile = "audit.jsonl"\n',
        encoding="utf-8",
    )
    async with running_hub(load_config(path)) as hub, hub_client(hub, "2026-07-28") as client:
        entries, _ = await listing(client)
        assert [e["uri"] for e in entries] == ["skill://team/deploy/SKILL.md"]
        assert (await send(client, "skills/get", uri="skill://team/deploy/SKILL.md"))["skill"] == entries[0]
        with pytest.raises(MCPError) as hidden:
            await send(client, "skills/get", uri="skill://team/team/review/SKILL.md")
        assert (hidden.value.error.code, hidden.value.error.message) == (
            INVALID_PARAMS,
            "Unknown resource: skill://team/team/review/SKILL.md",
        )
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text(encoding="utf-8").splitlines()]
    gets = [(line["mount"], line["name"], line["outcome"]) for line in lines if line["method"] == "skills/get"]
    assert gets == [
        ("team", "skill://deploy/SKILL.md", "allowed"),
        ("team", "skill://team/review/SKILL.md", "denied"),
    ]


def test_a_skills_folder_that_is_not_one_or_whose_mount_is_taken_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    cases = [
        ('[skills]\nfolder = "missing"\n', "skills.folder", "is not a folder; create it"),
        ('[skills]\nfolder = "skills"\nmount = "Team_Skills"\n', "skills.mount", "write mount = 'team-skills'"),
        ('[skills]\nfoldr = "skills"\n', "skills.foldr", "did you mean 'folder'?"),
        (
            '[servers.skills]\ncommand = "x"\n\n[skills]\nfolder = "skills"\n',
            "skills.mount",
            "[servers.skills] is in this file already",
        ),
        (
            '[servers.only]\ncommand = "x"\nprefix = false\n\n[skills]\nfolder = "skills"\n',
            "servers.only.prefix",
            "the skills folder is mounted beside it",
        ),
    ]
    for text, key, reason in cases:
        with pytest.raises(ConfigError) as refused:
            parse_config(text, str(tmp_path / "hub.toml"))
        assert refused.value.key == key and reason in str(refused.value), (text, str(refused.value))
    config = parse_config('[skills]\nfolder = "skills"\n', str(tmp_path / "hub.toml"))
    server = config.servers["skills"]
    assert (server.command, server.args) == ("mcp-hub-skills", ("--name", "skills", str(tmp_path / "skills")))
    assert server.sandbox is not None
    assert (server.sandbox.profile, server.sandbox.network, server.sandbox.read) == (
        "standard",
        "none",
        (str(tmp_path / "skills"),),
    )
    assert parse_config("", str(tmp_path / "hub.toml")).servers == {}  # no folder: no mount


@slow  # ~6 s: a live hub starting mcp-hub-skills twice
async def test_a_skill_added_to_the_folder_is_served_after_a_list_changed(tmp_path: Path) -> None:
    """The hub watches the `[skills]` folder: a new skill restarts its mount, and clients hear
    `resources/list_changed` once its files are listed."""
    root = tmp_path / "skills"
    skill(root / "deploy", "---\nname: deploy\ndescription: Ship a release\n---\n")
    path = tmp_path / "hub.toml"
    path.write_text('[skills]\nfolder = "skills"\n', encoding="utf-8")
    hub = Hub(load_config(path))
    changed = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            changed[0].set()

    async with hub.running(live=True), hub_client(hub, message_handler=on_message) as client:
        await hub.wait_settled(30)
        assert [e["uri"] for e in (await listing(client))[0]] == ["skill://skills/deploy/SKILL.md"]
        skill(root / "review", "---\nname: review\ndescription: Review a change\n---\n", **{"notes.md": b"# Notes\n"})
        with anyio.fail_after(30):  # the resources are listed again after each list_changed, until the new ones are
            while "skill://skills/review/notes.md" not in {r.uri for r in (await client.list_resources()).resources}:
                await changed[0].wait()
                changed[0] = anyio.Event()
        assert [e["uri"] for e in (await listing(client))[0]] == [
            "skill://skills/deploy/SKILL.md",
            "skill://skills/review/SKILL.md",
        ]


def test_the_folders_signature_changes_with_any_file_under_it(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    assert folder_signature(str(root)) is None
    skill(root / "deploy", "---\nname: deploy\ndescription: Ship\n---\n")
    seen = [folder_signature(str(root))]
    assert seen[0] == folder_signature(str(root))  # nothing changed: the same
    (root / "deploy" / "run.sh").write_bytes(b"#!/bin/sh\n")  # added
    seen.append(folder_signature(str(root)))
    (root / "deploy" / "run.sh").write_bytes(b"#!/bin/bash\n")  # written (another size)
    seen.append(folder_signature(str(root)))
    (root / "deploy" / "run.sh").rename(root / "deploy" / "go.sh")  # renamed
    seen.append(folder_signature(str(root)))
    (root / "deploy" / "go.sh").unlink()  # removed: as at first, but for the folder's own time
    seen.append(folder_signature(str(root)))
    assert len(set(seen)) == len(seen)


@slow  # ~3 s: two hubs (replicas sharing a Redis) each with a stdio skills server
async def test_replicas_open_each_others_cursors(tmp_path: Path, redis_server: Any) -> None:
    """With `[cluster]`, a cursor one replica gave resumes the listing at another (the replicas' shared key)."""
    hubs = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        path = write_config(folder / "hub.toml", {"docs": script_server(SERVER, str(DATA / "docs"), "--page", "1")})
        with path.open("a", encoding="utf-8") as file:
            file.write(f'\n[cluster]\nredis = "{redis_server.url}"\nsecret = "replicas-secret"\n')
        hubs.append(load_config(path))
    async with (
        running_hub(hubs[0]) as a,
        running_hub(hubs[1]) as b,
        hub_client(a, "2026-07-28") as at_a,
        hub_client(b, "2026-07-28") as at_b,
    ):
        first = await send(at_a, "skills/list")
        second = await send(at_b, "skills/list", cursor=first["nextCursor"])
    assert [e["uri"] for e in first["skills"] + second["skills"]] == [
        "skill://docs/acme/billing/refunds/SKILL.md",
        "skill://docs/pdf-processing/SKILL.md",
    ]

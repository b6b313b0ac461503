"""`mcp-hub-skills FOLDER`: an MCP server that serves a folder of Agent Skills (SEP-2640), for teams who write
skills for their own tool set and have no server to publish them. Mounted like any server:

    [servers.team-skills]
    command = "mcp-hub-skills"
    args = ["skills"]

Every folder under FOLDER holding a `SKILL.md` is a skill, at `skill://<its path>/SKILL.md` (`skills/pdf/SKILL.md`
-> `skill://pdf/SKILL.md`; nested folders give nested paths, `skill://acme/billing/refunds/SKILL.md`). Its
`SKILL.md` must begin with YAML frontmatter naming it (`name`, equal to its folder's name, as the Agent Skills
specification requires) and describing it (`description`). Every file of a skill is a resource: text that is UTF-8
as text, anything else as a blob, so its bytes reach a client as they are on disk. The server declares the
`io.modelcontextprotocol/skills` extension with `directoryRead`, and answers `skills/list` (50 entries a page, in
path order), `skills/get` and `resources/directory/read` (a skill's folders; -32602 for anything else), each
entry with its frontmatter as YAML reads it and each file's `sha256:` digest and size.

The folder is read once, at start: a change is served from the next start (the hub restarts a server whose
table changes, and the mount of hub.toml's `[skills] folder`, which runs this server, when the folder changes).
What is not a skill it can serve is left out, with a line on stderr naming the file, why, and the
fix: a `SKILL.md` without frontmatter, or whose `name` is missing, not the folder's, or not a valid skill name; a
skill over the extension's limits (512 files, 16 MiB); files and folders whose name starts with `.`, and
`__pycache__` folders; links that lead out of FOLDER.
"""

from __future__ import annotations

import argparse
import hashlib
import mimetypes
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import BinaryResource, TextResource
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, RequestParams

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
PAGE = 50
"""Entries in one page of `skills/list`."""
MAX_FILES = 512
MAX_BYTES = 16 * 1024 * 1024
"""The extension's limits of one skill: what every host must accept."""
TTL_MS = 60_000
"""How long a client may keep an entry or a listing (`ttlMs`): the folder changes only with a restart."""
_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
"""A skill name (Agent Skills): lowercase letters, digits, single hyphens inside; at most 64 characters."""
_MIME = {".md": "text/markdown", ".py": "text/x-python", ".sh": "text/x-shellscript", ".txt": "text/plain"}


class _UriParams(RequestParams):
    uri: str
    cursor: str | None = None


class _ListParams(RequestParams):
    cursor: str | None = None


@dataclass(frozen=True)
class _File:
    uri: str
    path: Path
    data: bytes

    @property
    def entry(self) -> dict[str, Any]:
        return {"uri": self.uri, "digest": "sha256:" + hashlib.sha256(self.data).hexdigest(), "size": len(self.data)}


@dataclass(frozen=True)
class _Skill:
    folder: Path
    uri: str
    frontmatter: dict[str, Any]
    files: tuple[_File, ...]

    @property
    def entry(self) -> dict[str, Any]:
        return {"uri": self.uri, "frontmatter": self.frontmatter, "resources": [f.entry for f in self.files]}


def frontmatter(text: str) -> dict[str, Any] | None:
    """The YAML frontmatter at the start of a SKILL.md, as a JSON object; None when it has none."""
    if not text.startswith("---"):
        return None
    head, sep, _ = text[3:].lstrip("\r\n").partition("\n---")
    if not sep:
        return None
    try:
        loaded = yaml.safe_load(head)
    except yaml.YAMLError:
        return None
    return loaded if isinstance(loaded, dict) else None


class FolderSkills(Extension):
    """The skills extension over the skills of one folder (read once)."""

    identifier = SKILLS_EXTENSION

    def __init__(self, root: Path, warn: Any = None) -> None:
        self.root = root.resolve()
        self._warn = warn or (lambda text: print(f"mcp-hub-skills: {text}", file=sys.stderr))
        self.skills = self._read()
        self._by_uri = {s.uri: s for s in self.skills}
        self._folders = {self._uri(p) for s in self.skills for p in (s.folder, *self._subfolders(s))}

    # -- reading the folder ---------------------------------------------------------------------------------

    def _uri(self, path: Path) -> str:
        return SCHEME + path.relative_to(self.root).as_posix()

    def _inside(self, path: Path) -> bool:
        """Whether `path` is served: no part of it hidden (`.name`) or Python's byte code (`__pycache__`), and
        inside the folder once its links are followed."""
        parts = path.relative_to(self.root).parts
        if any(part.startswith(".") or part == "__pycache__" for part in parts):
            return False
        return path.resolve().is_relative_to(self.root)

    def _read(self) -> list[_Skill]:
        skills: list[_Skill] = []
        for skill_md in sorted(self.root.rglob("SKILL.md")):
            if not self._inside(skill_md) or not skill_md.is_file():
                continue
            skill = self._skill(skill_md.parent)
            if skill is not None:
                skills.append(skill)
        return skills

    def _skill(self, folder: Path) -> _Skill | None:
        where = folder.relative_to(self.root).as_posix() + "/SKILL.md"
        if folder == self.root:
            self._warn(f"{where}: a skill is a folder inside the skills folder, not the folder itself; left out")
            return None
        head = frontmatter((folder / "SKILL.md").read_bytes().decode("utf-8", "replace"))
        if head is None:
            self._warn(f"{where}: no YAML frontmatter (--- name: ... description: ... ---) at its start; left out")
            return None
        name, description = head.get("name"), head.get("description")
        if len(folder.name) > 64 or not _NAME.match(folder.name):
            self._warn(
                f"{where}: {folder.name!r} is not a skill name; rename the folder (and its name:) with lowercase "
                "letters, digits and single hyphens, at most 64; left out"
            )
            return None
        if name != folder.name:
            self._warn(f"{where}: its name is {name!r}; write name: {folder.name} (the folder's name); left out")
            return None
        if not isinstance(description, str) or not description.strip():
            self._warn(f"{where}: it has no description; write description: what it does and when to use it; left out")
            return None
        paths = sorted(p for p in folder.rglob("*") if p.is_file() and self._inside(p))
        if len(paths) > MAX_FILES:
            self._warn(f"{where}: {len(paths)} files, over the extension's {MAX_FILES}; left out")
            return None
        files = tuple(_File(self._uri(p), p, p.read_bytes()) for p in paths)
        total = sum(len(f.data) for f in files)
        if total > MAX_BYTES:
            self._warn(f"{where}: {total} bytes of files, over the extension's {MAX_BYTES}; left out")
            return None
        return _Skill(folder, self._uri(folder / "SKILL.md"), head, files)

    def _subfolders(self, skill: _Skill) -> list[Path]:
        return sorted(p for p in skill.folder.rglob("*") if p.is_dir() and self._inside(p))

    # -- the extension ---------------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def resources(self) -> Sequence[ResourceBinding]:
        bindings: list[ResourceBinding] = []
        seen: set[str] = set()
        for skill in self.skills:
            for file in skill.files:
                if file.uri in seen:  # a file of a nested skill is its enclosing skill's too
                    continue
                seen.add(file.uri)
                bindings.append(ResourceBinding(self._resource(skill, file)))
        return bindings

    def _resource(self, skill: _Skill, file: _File) -> Any:
        name, description = file.path.name, None
        if file.uri in self._by_uri:  # a SKILL.md: named and described as its frontmatter says
            head = self._by_uri[file.uri].frontmatter
            name, description = head["name"], head["description"]
        mime = _MIME.get(file.path.suffix) or mimetypes.guess_type(file.path.name)[0] or "application/octet-stream"
        try:
            text = file.data.decode("utf-8")
        except UnicodeDecodeError:
            return BinaryResource(uri=file.uri, name=name, description=description, mime_type=mime, data=file.data)
        return TextResource(uri=file.uri, name=name, description=description, mime_type=mime, text=text)

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("skills/list", _ListParams, self.list_skills),
            MethodBinding("skills/get", _UriParams, self.get_skill),
            MethodBinding("resources/directory/read", _UriParams, self.read_directory),
        )

    async def list_skills(self, ctx: ServerRequestContext[Any, Any], params: _ListParams) -> dict[str, Any]:
        start = 0
        if params.cursor is not None:
            if not params.cursor.isdigit() or int(params.cursor) > len(self.skills):
                raise MCPError(INVALID_PARAMS, f"Invalid cursor: {params.cursor[:80]!r}; start again without one")
            start = int(params.cursor)
        page = self.skills[start : start + PAGE]
        result: dict[str, Any] = {"skills": [s.entry for s in page], "ttlMs": TTL_MS, "cacheScope": "public"}
        if start + PAGE < len(self.skills):
            result["nextCursor"] = str(start + PAGE)
        return result

    async def get_skill(self, ctx: ServerRequestContext[Any, Any], params: _UriParams) -> dict[str, Any]:
        skill = self._by_uri.get(params.uri)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"No skill is served at {params.uri}")
        return {"skill": skill.entry, "ttlMs": TTL_MS, "cacheScope": "public"}

    async def read_directory(self, ctx: ServerRequestContext[Any, Any], params: _UriParams) -> dict[str, Any]:
        if params.uri not in self._folders:
            raise MCPError(INVALID_PARAMS, f"{params.uri} is not a directory resource")
        folder = self.root / params.uri.removeprefix(SCHEME)
        children: list[dict[str, Any]] = []
        for child in sorted(folder.iterdir()):
            if not self._inside(child):
                continue
            if child.is_dir():
                children.append({"uri": self._uri(child), "name": child.name, "mimeType": "inode/directory"})
            elif child.is_file():
                mime = _MIME.get(child.suffix) or mimetypes.guess_type(child.name)[0] or "application/octet-stream"
                children.append({"uri": self._uri(child), "name": child.name, "mimeType": mime})
        return {"resources": children}


def build_server(root: Path, name: str = "skills") -> MCPServer:
    """The server of the skills in `root`."""
    skills = FolderSkills(root)
    count = len(skills.skills)
    instructions = f"Agent Skills ({count}): list them with skills/list, read their files with resources/read."
    return MCPServer(name, instructions=instructions, extensions=[skills])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="mcp-hub-skills", description="Serve a folder of Agent Skills over stdio.")
    parser.add_argument("folder", type=Path, help="the folder whose subfolders holding a SKILL.md are skills")
    parser.add_argument("--name", default="skills", help="the server's name (its serverInfo)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.exit(2, f"mcp-hub-skills: {args.folder} is not a folder; give the folder that holds the skills\n")
    build_server(args.folder, args.name).run("stdio")


if __name__ == "__main__":
    main()

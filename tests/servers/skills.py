"""A real MCP server serving Agent Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension) from a folder.

Built on the SDK's `MCPServer` with an `Extension` of its own (the SDK has no skills support yet): every folder
under the root holding a `SKILL.md` is a skill, at `skill://<its path>`; every file of a skill is a resource
(`text/markdown` and other text as text, the rest as a blob, so bytes go out as they are on disk). It declares
`{"directoryRead": true}` and serves `skills/list` (`--page N` entries a page, in path order), `skills/get`
(-32602 for a URI that is not a skill's `SKILL.md`) and `resources/directory/read` (a folder's direct children,
folders as `inode/directory`). Entries carry the frontmatter as YAML reads it, and every file's `sha256:` digest
and size. A tool `skill_count` answers how many skills it serves. With `broken` (in-process), `skills/list` fails.

`python tests/servers/skills.py ROOT [--page N]` serves stdio; `build_server(root)` in-process.
"""

from __future__ import annotations

import argparse
import hashlib
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import BinaryResource, TextResource
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, RequestParams

SKILLS = "io.modelcontextprotocol/skills"
SCHEME = "skill://"
DATA = Path(__file__).resolve().parent.parent / "data" / "skills"
_TEXT = {".md": "text/markdown", ".sh": "text/x-shellscript", ".txt": "text/plain"}


class UriParams(RequestParams):
    uri: str
    cursor: str | None = None


class ListParams(RequestParams):
    cursor: str | None = None


def frontmatter(text: str) -> dict[str, Any]:
    """The YAML frontmatter of a SKILL.md, as a JSON object."""
    _, head, _ = text.split("---\n", 2)
    loaded = yaml.safe_load(head)
    assert isinstance(loaded, dict)
    return loaded


class Skills(Extension):
    identifier = SKILLS

    def __init__(self, root: Path, page: int, broken: bool = False) -> None:
        self.root = root
        self.page = page
        self.broken = broken
        self.skills = sorted(p.parent for p in root.rglob("SKILL.md"))

    def uri(self, path: Path) -> str:
        return SCHEME + path.relative_to(self.root).as_posix()

    def files(self, skill: Path) -> list[Path]:
        return sorted(p for p in skill.rglob("*") if p.is_file())

    def entry(self, skill: Path) -> dict[str, Any]:
        resources = []
        for path in self.files(skill):
            data = path.read_bytes()
            resources.append(
                {"uri": self.uri(path), "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}
            )
        head = frontmatter((skill / "SKILL.md").read_text(encoding="utf-8"))
        return {"uri": self.uri(skill / "SKILL.md"), "frontmatter": head, "resources": resources}

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def resources(self) -> Sequence[ResourceBinding]:
        bindings: list[ResourceBinding] = []
        for path in sorted({p for skill in self.skills for p in self.files(skill)}):
            uri, name, description = self.uri(path), path.name, None
            mime = _TEXT.get(path.suffix)
            if path.name == "SKILL.md":  # named and described as its frontmatter says
                head = frontmatter(path.read_text(encoding="utf-8"))
                name, description = head["name"], head["description"]
            if mime is not None:
                text = path.read_bytes().decode("utf-8")
                resource: Any = TextResource(uri=uri, name=name, description=description, mime_type=mime, text=text)
            else:
                mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                resource = BinaryResource(uri=uri, name=name, mime_type=mime, data=path.read_bytes())
            bindings.append(ResourceBinding(resource))
        return bindings

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("skills/list", ListParams, self.list_skills),
            MethodBinding("skills/get", UriParams, self.get_skill),
            MethodBinding("resources/directory/read", UriParams, self.read_directory),
        )

    async def list_skills(self, ctx: ServerRequestContext[Any, Any], params: ListParams) -> dict[str, Any]:
        if self.broken:
            raise MCPError(INTERNAL_ERROR, "the skills index is unreadable")
        start = int(params.cursor) if params.cursor else 0
        page = self.skills[start : start + self.page]
        result: dict[str, Any] = {"skills": [self.entry(s) for s in page], "ttlMs": 60_000, "cacheScope": "public"}
        # What a server may say of its page: one key its own (the folder it serves), one every such server gives alike.
        result["_meta"] = {"example.com/folder": self.root.name, "example.com/index": "tests"}
        if start + self.page < len(self.skills):
            result["nextCursor"] = str(start + self.page)
        return result

    async def get_skill(self, ctx: ServerRequestContext[Any, Any], params: UriParams) -> dict[str, Any]:
        for skill in self.skills:
            if self.uri(skill / "SKILL.md") == params.uri:
                return {"skill": self.entry(skill), "ttlMs": 60_000, "cacheScope": "public"}
        raise MCPError(INVALID_PARAMS, f"No skill is served at {params.uri}")

    async def read_directory(self, ctx: ServerRequestContext[Any, Any], params: UriParams) -> dict[str, Any]:
        relative = params.uri.removeprefix(SCHEME)
        folder = self.root / relative
        inside = params.uri.startswith(SCHEME) and relative and ".." not in relative.split("/")
        if not inside or not folder.is_dir() or not any(folder == s or s in folder.parents for s in self.skills):
            raise MCPError(INVALID_PARAMS, f"{params.uri} is not a directory resource")
        children = []
        for child in sorted(folder.iterdir()):
            if child.is_dir():
                children.append({"uri": self.uri(child), "name": child.name, "mimeType": "inode/directory"})
            else:
                mime = _TEXT.get(child.suffix) or mimetypes.guess_type(child.name)[0] or "application/octet-stream"
                children.append({"uri": self.uri(child), "name": child.name, "mimeType": mime})
        return {"resources": children}


def build_server(
    root: Path = DATA / "docs", *, page: int = 100, name: str = "skills", broken: bool = False
) -> MCPServer:
    skills = Skills(root, page, broken)
    mcp = MCPServer(name, extensions=[skills])

    @mcp.tool(description="How many skills this server serves.")
    def skill_count() -> int:
        return len(skills.skills)

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--page", type=int, default=100)
    args = parser.parse_args()
    build_server(args.root, page=args.page).run("stdio")


if __name__ == "__main__":
    main()

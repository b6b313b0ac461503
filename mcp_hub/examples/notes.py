"""An example MCP server: a notepad kept in memory for as long as the process lives.

Mounted by the shipped hub.toml as `notes`; run on its own with `mcp-hub-example-notes`
(stdio). It offers one of everything a hub merges: tools (one read-only, one
destructive), a resource list, a resource template and a prompt.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("notes", instructions="A notepad: add, list, read and delete short notes.")
_notes: dict[str, str] = {"welcome": "Notes live in memory until the server stops."}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def add_note(title: str, text: str) -> str:
    """Add (or replace) the note `title`."""
    _notes[title] = text
    return f"saved {title!r} ({len(text)} characters)"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def list_notes() -> list[str]:
    """The titles of all notes."""
    return sorted(_notes)


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_note(title: str) -> str:
    """Delete the note `title`."""
    if _notes.pop(title, None) is None:
        raise ValueError(f"no note titled {title!r}")
    return f"deleted {title!r}"


@server.resource("notes://{title}", mime_type="text/plain")
def read_note(title: str) -> str:
    """One note's text."""
    if title not in _notes:
        raise ValueError(f"no note titled {title!r}")
    return _notes[title]


@server.resource("notes://index", mime_type="text/plain")
def index() -> str:
    """Every note title, one a line."""
    return "\n".join(sorted(_notes))


@server.prompt()
def summarize(title: str) -> str:
    """Ask the model to summarize one note."""
    return f"Summarize this note in one sentence:\n\n{_notes.get(title, '(no such note)')}"


def main() -> None:
    server.run()


if __name__ == "__main__":
    main()

"""A server on the Python SDK's 1.x line: `mcp.server.fastmcp.FastMCP` (the handshake era only).

Runs under the Python of `tests/.venv-sdk1` (see `tests/test_corpus.py`), which holds `mcp` 1.x:
`tests/.venv-sdk1/bin/python tests/servers/sdk1.py`. Tools (plain text, structured output, a tool
error), a resource, a resource template and a prompt, each as the 1.x SDK serves them.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

server = FastMCP("sdk1-server", log_level="WARNING")


class Weather(BaseModel):
    city: str
    celsius: float


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="The weather in a city, as structured content.")
def weather(city: str) -> Weather:
    return Weather(city=city, celsius=21.5)


@server.tool(description="Fail with the given message.")
def fail(message: str) -> str:
    raise ValueError(message)


@server.resource("sdk1://readme", mime_type="text/plain", description="A static text.")
def readme() -> str:
    return "The 1.x SDK's readme."


@server.resource("sdk1://notes/{title}", description="A note by title.")
def note(title: str) -> str:
    return f"Note {title}"


@server.prompt(description="Greet someone.")
def greet(name: str) -> str:
    return f"Hello, {name}!"


if __name__ == "__main__":
    server.run("stdio")

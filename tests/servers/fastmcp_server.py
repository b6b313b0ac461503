"""A server on PyPI's `fastmcp` (the 2.x line, built on the Python SDK 1.x; the handshake era only).

Runs under the Python of `tests/.venv-sdk1` (see `tests/test_corpus.py`), which holds `fastmcp`:
`tests/.venv-sdk1/bin/python tests/servers/fastmcp_server.py`. Tools (plain, structured output,
a tool error), a resource, a resource template and a prompt, each as FastMCP serves them.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

server = FastMCP("fastmcp-server")


@dataclass
class Order:
    item: str
    quantity: int
    total: float


@server.tool(description="Multiply two numbers.")
def multiply(a: float, b: float) -> float:
    return a * b


@server.tool(description="Place an order, answered as structured content.")
def order(item: str, quantity: int = 1) -> Order:
    return Order(item=item, quantity=quantity, total=quantity * 2.5)


@server.tool(description="Refuse, with the given reason.")
def refuse(reason: str) -> str:
    raise ToolError(reason)


@server.resource("fastmcp://config", mime_type="application/json", description="A JSON resource.")
def config() -> dict:
    return {"mode": "test", "items": [1, 2, 3]}


@server.resource("fastmcp://users/{user_id}/profile", description="A user's profile.")
def profile(user_id: int) -> dict:
    return {"id": user_id, "name": f"user {user_id}"}


@server.prompt(description="Ask for a summary of a text.")
def summarize(text: str) -> str:
    return f"Summarize this: {text}"


if __name__ == "__main__":
    server.run("stdio", show_banner=False)

"""People at clients: scripted answers to the questions (elicitation, sampling, roots) a server asks through the hub."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError


class Meeting:
    """Holds every answer back until `size` questions are open at once, so the questions overlap for sure."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.open = 0
        self.full = anyio.Event()

    async def wait(self) -> None:
        full = self.full
        self.open += 1
        if self.open == self.size:
            self.open, self.full = 0, anyio.Event()  # the next round meets anew
            full.set()
        await full.wait()

    def adjourn(self) -> None:
        """Let everyone waiting go: a participant will not come (its call ended without being asked)."""
        self.full.set()


class Person:
    """A client's answers, recording what it was asked; with a `meeting`, answering only once all are asked."""

    def __init__(self, name: str, meeting: Meeting | None = None) -> None:
        self.name = name
        self.asked: list[str] = []
        self.meeting = meeting

    async def _met(self) -> None:
        if self.meeting is not None:
            await self.meeting.wait()

    async def sampling(self, context: ClientRequestContext, params: types.CreateMessageRequestParams) -> Any:
        self.asked.append("sampling")
        await self._met()
        text = params.messages[0].content.text  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=f"{self.name} read {text!r}"), model="m-1"
        )

    async def elicitation(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> Any:
        self.asked.append("elicitation")
        await self._met()
        return types.ElicitResult(action="accept", content={"answer": self.name})

    async def roots(self, context: ClientRequestContext) -> Any:
        self.asked.append("roots")
        await self._met()
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///home/{self.name}", name="home")])

    def options(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
        }


EXPECTED = {
    "sampling": "sampled: ada read 'hello'",
    "elicitation": "elicited: accept {'answer': 'ada'}",
    "roots": "roots: file:///home/ada",
}


def expected(what: str, name: str) -> str:
    """What `srv_ask` answers when `name` answered its question `what` (asked with the text "hello")."""
    return {
        "sampling": f"sampled: {name} read 'hello'",
        "elicitation": f"elicited: accept {{'answer': '{name}'}}",
        "roots": f"roots: file:///home/{name}",
    }[what]


async def ask_at_once(people: dict[Person, Client], what: str, **arguments: Any) -> dict[str, str]:
    """Each person's client calls `srv_ask` at once; what each call answered, by person.

    The people share a `Meeting`, so each question is answered only once all are open: the calls
    are all in flight when the server asks. A call that ends unasked adjourns the meeting.
    """
    results: dict[str, str] = {}

    async def call(person: Person, client: Client) -> None:
        try:
            result = await client.call_tool("srv_ask", {"what": what, "text": "hello", **arguments})
            results[person.name] = result.content[0].text  # type: ignore[union-attr]
        except MCPError as exc:
            results[person.name] = f"error: {exc.message}"
        finally:
            if person.meeting is not None:
                person.meeting.adjourn()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for person, client in people.items():
                tg.start_soon(call, person, client)
    return results

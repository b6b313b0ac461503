"""npm's server-everything over HTTP, and the scripted answers a client gives to what it asks."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
import mcp_types as types
from mcp.client.session import ClientRequestContext

from tests.conftest import EVERYTHING, wait_for
from tests.harness.processes import logging_until

_LOOPBACK_PRELOAD = r"""
// server-everything listens on every interface (express `app.listen(PORT)`); keep it on
// loopback, and say which port it got (PORT=0 picks a free one; it would log "port 0").
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (/^\d+$/.test(String(args[0])) && typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  this.once("listening", () => process.stderr.write(`loopback port ${this.address().port}\n`));
  return listen.apply(this, args);
};
"""


@asynccontextmanager
async def everything_over_http(workdir: Path) -> AsyncIterator[str]:
    """Run `mcp-server-everything streamableHttp` on a free loopback port; yield its MCP URL."""
    preload = workdir / "loopback.cjs"
    preload.write_text(_LOOPBACK_PRELOAD, encoding="utf-8")
    log = workdir / "everything.log"
    env = {**os.environ, "PORT": "0", "NODE_OPTIONS": f'--require "{preload}"'}
    command = [str(EVERYTHING), "streamableHttp"]
    async with logging_until(command, log, r"^loopback port (\d+)$", "server-everything", cwd=workdir, env=env) as port:
        url = f"http://127.0.0.1:{port[1]}/mcp"

        async def answers() -> bool:
            try:
                async with httpx2.AsyncClient() as http:
                    response = await http.get(url)  # no session: a JSON-RPC error, but an answer
            except httpx2.HTTPError:
                return False
            return response.status_code == 400

        await wait_for(answers, timeout=10)
        yield url


SAMPLING_CAPABILITY = types.SamplingCapability(
    context=types.SamplingContextCapability(), tools=types.SamplingToolsCapability()
)


@dataclass(frozen=True)
class Script:
    """How a client answers a server's questions."""

    model: str = "hub-test-model-7"
    reply: str = "A reply the client wrote ✓"
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = None
    roots: tuple[tuple[str, str], ...] = ()
    """(uri, name) pairs."""


class Asked:
    """A client's answers to a server's questions (per its `script`; none: decline), and what it was asked."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script
        self.questions: list[tuple[str, Any]] = []

    def reset(self, script: Script | None = None) -> None:
        self.script = script
        self.questions.clear()

    def of(self, method: str) -> list[Any]:
        """The params of each `method` question asked."""
        return [params for asked, params in self.questions if asked == method]

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        self.questions.append(("sampling/createMessage", dump(params)))
        if self.script is None:
            return _DECLINED
        content = types.TextContent(type="text", text=self.script.reply)
        return types.CreateMessageResult(role="assistant", content=content, model=self.script.model)

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.questions.append(("elicitation/create", dump(params)))
        if self.script is None:
            return _DECLINED
        content = self.script.content if self.script.action == "accept" else None
        return types.ElicitResult(action=self.script.action, content=content)

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        self.questions.append(("roots/list", None))
        if self.script is None:
            return _DECLINED
        return types.ListRootsResult(roots=[types.Root(uri=uri, name=name) for uri, name in self.script.roots])  # type: ignore[arg-type]

    def options(self) -> dict[str, Any]:
        """Client options declaring what the hub declares to its servers, answered by this object."""
        return {
            "sampling_callback": self.sampling,
            "sampling_capabilities": SAMPLING_CAPABILITY,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.roots,
        }


_DECLINED = types.ErrorData(code=-32600, message="declined")


def dump(model: Any) -> Any:
    """A result as JSON data, for comparing."""
    if isinstance(model, list):
        return [dump(m) for m in model]
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)

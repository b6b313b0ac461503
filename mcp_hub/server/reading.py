"""Reading kept results: `resources/read` of `hub://results/ID/PART[?offset=N]`, and the `read_result` tool.

When a result is cut to its budget (chain/results.py), the whole is kept for the principal that received it
(results/kept.py), and the cut result links to it. Its reader reads it page by page, each page within the
budget the result was cut to:

- `resources/read` answers the page as one text content (a blob part: the blob, whole), its `_meta`
  (`mcp-hub/page`) naming the offsets and the next page's link;
- the `read_result` tool (`{"uri": "hub://results/ID/0", "offset": N}`), for clients that do not read
  resources: the page as its first text block, and a second block saying where it ends and what to read next.

The tool is listed while a budget is on for anyone here: `[results] max_result_tokens`, the endpoint's, or a
policy profile's or rule's. Reads are answered by the hub itself, outside the chain: the guardrails saw the
whole before it was kept, and only its own principal may read it (another one gets a clear error).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from mcp_hub.config import ResultSettings
from mcp_hub.errors import NotKept
from mcp_hub.policy import PolicySet
from mcp_hub.results import KeptResults, Page
from mcp_hub.server.curated import Selection

PAGE_META = "mcp-hub/page"


class Reader:
    def __init__(
        self, kept: KeptResults, settings: ResultSettings, selection: Selection, policy: Callable[[], PolicySet]
    ) -> None:
        self._kept = kept
        self._settings = settings
        self._selection = selection
        self._policy = policy
        self.tool: dict[str, Any] = {
            "name": settings.read_tool,
            "title": "Read a kept result",
            "description": (
                "Read the rest of a result that was cut to fit your context: pass the link its note gives "
                "(hub://results/...) and the offset to read from (0, or the next offset the previous page gave). "
                "Each page fits the same budget."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": "The kept result's link, hub://results/ID/PART."},
                    "offset": {"type": "integer", "minimum": 0, "description": "The character to read from."},
                },
                "required": ["uri"],
            },
            "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        }

    def listed(self, principal: str, policy: PolicySet) -> bool:
        """Whether the read tool is listed here: a budget is on at the hub, at this endpoint or in the policy."""
        endpoint = self._selection.max_result_tokens
        on_here = endpoint > 0 if endpoint is not None else self._settings.max_result_tokens > 0
        return on_here or policy.says_result_budget

    def is_read_tool(self, params: Mapping[str, Any], principal: str) -> bool:
        return params.get("name") == self._settings.read_tool and self.listed(principal, self._policy())

    async def read_resource(self, principal: str, uri: str) -> dict[str, Any]:
        page = await self._kept.page(principal, uri)
        if page.text is None:
            return {"contents": [{"uri": uri, "mimeType": page.mime_type, "blob": page.blob}]}
        meta = {PAGE_META: {"offset": page.offset, "end": page.end, "total": page.total, "next": page.next_uri}}
        return {"contents": [{"uri": uri, "mimeType": page.mime_type, "text": page.text, "_meta": meta}]}

    async def read_tool(self, principal: str, arguments: Any) -> dict[str, Any]:
        """The read tool's answer; a read that cannot be served is a tool error saying why."""
        arguments = arguments if isinstance(arguments, Mapping) else {}
        uri, offset = arguments.get("uri"), arguments.get("offset", 0)
        try:
            if not isinstance(uri, str):
                raise NotKept(f"{self._settings.read_tool}: 'uri' must be the link of a kept result, as a string")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise NotKept(f"{self._settings.read_tool}: 'offset' must be a whole number from 0")
            page = await self._kept.page(principal, uri.split("?", 1)[0], offset)
        except NotKept as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        return {"content": _blocks(page), "isError": False}


def _blocks(page: Page) -> list[dict[str, Any]]:
    if page.text is None:
        blob = page.blob or ""
        if page.mime_type.startswith("image/"):
            return [{"type": "image", "data": blob, "mimeType": page.mime_type}]
        if page.mime_type.startswith("audio/"):
            return [{"type": "audio", "data": blob, "mimeType": page.mime_type}]
        size = len(base64.b64decode(blob)) if blob else 0
        resource = {"uri": page.uri, "mimeType": page.mime_type, "blob": blob}
        return [
            {"type": "resource", "resource": resource},
            {"type": "text", "text": f"[mcp-hub] {page.uri}: {size:,} bytes, whole."},
        ]
    after = "This is the end." if page.end >= page.total else f'Next: {{"uri": "{page.uri}", "offset": {page.end}}}.'
    note = f"[mcp-hub] Characters {page.offset:,} to {page.end:,} of {page.total:,} of {page.uri}. {after}"
    return [{"type": "text", "text": page.text}, {"type": "text", "text": note}]

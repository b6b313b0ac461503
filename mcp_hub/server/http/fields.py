"""HTTP field values as RFC 9110 defines them: without the whitespace around them.

RFC 9110 (section 5.5) makes the optional whitespace (OWS: spaces and tabs)
before and after a field's value no part of the value, and a recipient must
exclude it before evaluating the value. uvicorn's HTTP/1.1 parser (h11) drops
the whitespace before a value but keeps what follows it, and the SDK compares
`Mcp-Name`, `Mcp-Method`, `MCP-Protocol-Version` and `Mcp-Param-*` with the
request body as they are, so `Mcp-Name: get_weather ` would be refused as a
mismatch. `FieldValues` hands the endpoint every header value without it, so
the hub's own readers and the SDK's see the values HTTP defines.

Whitespace inside a value is part of it and stays; a value that must keep
whitespace at its edges travels Base64-encoded (`=?base64?...?=`), which
`mcp.shared.inbound.decode_header_value` decodes where a value is compared.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

_OWS = b" \t"
_OWS_BYTES = frozenset(_OWS)


def has_edge_whitespace(value: bytes) -> bool:
    """Whether a field value starts or ends with a space or a tab."""
    return bool(value) and (value[0] in _OWS_BYTES or value[-1] in _OWS_BYTES)


def trimmed_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]] | None:
    """The ASGI headers with every value stripped of the spaces and tabs around it; None: none had any."""
    if not any(has_edge_whitespace(value) for _, value in headers):
        return None
    return [(name, value.strip(_OWS)) for name, value in headers]


class FieldValues:
    """Pure ASGI middleware: the request's header values without the whitespace around them (RFC 9110 OWS).

    A request whose values have none (nearly every one) is passed on as it came."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = trimmed_headers(scope["headers"])
            if headers is not None:
                scope = {**scope, "headers": headers}
        await self._app(scope, receive, send)

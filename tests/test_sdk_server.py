"""The serving side's SDK internals that live on instances (not on classes) exist on real instances."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import anyio
import pytest
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from mcp_hub import sdk
from mcp_hub.sdk import server as sdk_server


@pytest.fixture
def instances() -> Iterator[dict[str, object]]:
    """One real instance of each class that holds an attribute the hub names."""
    send, receive = anyio.create_memory_object_stream[object](1)
    with send, receive:
        yield {
            "mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher": JSONRPCDispatcher(receive, send),  # type: ignore[arg-type]
            "mcp.server.streamable_http:StreamableHTTPServerTransport": StreamableHTTPServerTransport(None),
            "mcp.server.streamable_http_manager:StreamableHTTPSessionManager": StreamableHTTPSessionManager(
                Server("t")
            ),
            "contextlib:AsyncExitStack": contextlib.AsyncExitStack(),
        }


@pytest.mark.parametrize(("owner", "attribute"), sdk_server.INSTANCE_SURFACE)
def test_every_instance_attribute_the_hub_names_exists(
    instances: dict[str, object], owner: str, attribute: str
) -> None:
    cls = sdk.resolve(owner)
    if dataclasses.is_dataclass(cls):
        assert attribute in {f.name for f in dataclasses.fields(cls)}
        return
    instance = instances[owner]
    assert isinstance(instance, cls)  # type: ignore[arg-type]
    assert hasattr(instance, attribute), f"{owner} instances have no {attribute!r}"


def test_a_missing_instance_attribute_is_caught(instances: dict[str, object]) -> None:
    assert not hasattr(instances["mcp.shared.jsonrpc_dispatcher:JSONRPCDispatcher"], "_renamed_in_a_later_release")

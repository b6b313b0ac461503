"""The JSON the hub writes itself reads back as pydantic-core alone wrote it: what orjson writes, and what it
refuses (integers past 64 bits, keys that are not strings, objects) written by pydantic-core."""

from __future__ import annotations

import json

import mcp_types as types
import pydantic_core
import pytest

from mcp_hub import wire

MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": 'héllo \u2028 "q" \n'}]}},
    {"jsonrpc": "2.0", "id": "hub-7", "result": {"content": [{"type": "text", "text": "x" * 1_000_000}]}},
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 0.5}},
    {"jsonrpc": "2.0", "id": 2, "result": {"big": 2**70, "negative": -(2**65)}},  # past 64 bits
    {"jsonrpc": "2.0", "id": 3, "result": {"keys": {1: "a", 2: "b"}}},  # keys that are not strings
    {"jsonrpc": "2.0", "id": 4, "result": types.TextContent(type="text", text="a model")},  # an object
]


@pytest.mark.slow
@pytest.mark.parametrize("message", MESSAGES, ids=["text", "1 MB", "notification", "big ints", "int keys", "model"])
def test_a_message_is_written_as_json_that_reads_back_as_itself(message: dict[str, object]) -> None:
    written = wire.dumps(message)
    line = wire.dumps_line(message)
    assert line == written + b"\n" and b"\n" not in written
    assert json.loads(written) == json.loads(pydantic_core.to_json(message))  # as pydantic-core alone wrote it

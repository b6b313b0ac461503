"""A provider's tool call as the hub call it stands for: the hub's tool name, the arguments, and the
provider's id of the call (to answer it under)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ToolCallError(ValueError):
    """A provider's tool call the hub cannot make (arguments that are not a JSON object, a missing name).
    Answered to the model as an error result, so that it can correct itself."""


@dataclass(frozen=True)
class HubCall:
    name: str
    """The hub's name of the tool."""
    arguments: dict[str, Any]
    call_id: str | None
    """The provider's id of the call (OpenAI's tool_call id, Anthropic's tool_use id, Gemini's optional id)."""
    exported_name: str
    """The name the provider called it by (Gemini answers under it)."""

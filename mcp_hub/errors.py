"""The hub's own errors, and the one place they become JSON-RPC errors.

```
HubError                      (JSON-RPC code -32603 unless a subclass says otherwise)
├── ConfigError               bad hub.toml / import file: names the file, key and fix
├── UnknownName               a tool/prompt/resource the caller cannot see (-32602)
├── InvalidCursor             a pagination cursor the hub did not issue (-32602)
├── CapabilityMissing         the request needs a capability the client did not declare (-32021)
├── HeaderMismatch            an Mcp-* header says other than the body (-32020)
├── Refused                   the policy refused these arguments, or a person said no (-32602)
├── RateLimited               over a rate limit; says when to retry (-32029, data.retryAfter)
├── OverBudget                over a budget of calls or cost; names it and when it renews (-32029)
├── NotKept                   a kept result (hub://results/ID) that is gone, or another principal's (-32602)
└── UpstreamError             something went wrong on the way to a mounted server
    ├── UpstreamUnavailable   the mount is not connected right now (-32000)
    └── UpstreamTimeout       the mount did not answer in time (-32001)
```

Errors a mounted server returns itself (`MCPError` from the SDK) are not wrapped:
they travel to the client unchanged. Tool errors (`isError: true` results) are
results, not errors, and never pass through here.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_PARAMS, REQUEST_TIMEOUT
from mcp_types.jsonrpc import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY


class HubError(Exception):
    """Base of every error the hub raises on its own account."""

    code: int = INTERNAL_ERROR

    def to_mcp(self) -> MCPError:
        """This error as the SDK exception the server runner puts on the wire."""
        return MCPError(code=self.code, message=str(self))


class ConfigError(HubError):
    """A configuration file is unusable. The message names file, key and fix."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        self.file = file
        self.key = key
        self.reason = reason
        where = f"{file}: {key}" if key else file
        self.problems: list[ConfigError] = [self]
        """Each problem found, when this error reports several at once (one line each in the message)."""
        super().__init__(f"{where}: {reason}")


class UnknownName(HubError):
    """The caller named a tool, prompt or resource it cannot see.

    Answered exactly like a name that never existed, so hidden and absent look alike.
    """

    code = INVALID_PARAMS

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"Unknown {kind}: {name}")


class InvalidCursor(HubError):
    """A `cursor` that this hub did not hand out (or no longer understands)."""

    code = INVALID_PARAMS

    def __init__(self, cursor: str) -> None:
        super().__init__(f"Invalid cursor: {cursor[:80]!r}; start again without a cursor")


class CapabilityMissing(HubError):
    """A request the client may not make without a capability it did not declare; `required` names it
    (`data.requiredCapabilities`, as a server answers)."""

    code = MISSING_REQUIRED_CLIENT_CAPABILITY

    def __init__(self, message: str, required: dict[str, Any]) -> None:
        self.required = required
        super().__init__(message)

    def to_mcp(self) -> MCPError:
        return MCPError(code=self.code, message=str(self), data={"requiredCapabilities": self.required})


class HeaderMismatch(HubError):
    """An `Mcp-*` request header that names other than the request's body does (as a server answers)."""

    code = HEADER_MISMATCH


class Refused(HubError):
    """The policy refused the call as made (arguments, confirmation); names the rule."""

    code = INVALID_PARAMS

    def __init__(self, reason: str, rule: str | None) -> None:
        self.reason = reason
        self.rule = rule
        super().__init__(reason)


RATE_LIMITED = -32029
"""JSON-RPC error code (server-defined range) for a call over a rate limit."""


class RateLimited(HubError):
    """Over a rate limit. `retry_after` is in seconds."""

    code = RATE_LIMITED

    def __init__(self, rule: str, rate: str, retry_after: float) -> None:
        self.rule = rule
        self.retry_after = retry_after
        super().__init__(f"Rate limit {rate} (rule {rule}) reached; retry in {max(retry_after, 0.1):.1f}s")

    def to_mcp(self) -> MCPError:
        return MCPError(code=self.code, message=str(self), data={"retryAfter": round(self.retry_after, 3)})


class OverBudget(HubError):
    """Over a budget of calls or cost (policy/budgets.py). `retry_after`: seconds until it renews."""

    code = RATE_LIMITED

    def __init__(self, message: str, budget: str, renews_at: str, retry_after: float) -> None:
        self.budget = budget
        self.renews_at = renews_at
        self.retry_after = retry_after
        super().__init__(message)

    def to_mcp(self) -> MCPError:
        data = {"budget": self.budget, "renewsAt": self.renews_at, "retryAfter": round(self.retry_after, 3)}
        return MCPError(code=self.code, message=str(self), data=data)


class NotKept(HubError):
    """A read of a kept result (`hub://results/ID`, the `read_result` tool) that cannot be served: the link is not
    one, the result expired or never was, or it was kept for another principal."""

    code = INVALID_PARAMS


class UpstreamError(HubError):
    """A failure reaching a mounted server; always names the mount."""

    def __init__(self, mount: str, detail: str) -> None:
        self.mount = mount
        self.detail = detail
        super().__init__(f"Server '{mount}' {detail}")


class UpstreamUnavailable(UpstreamError):
    code = CONNECTION_CLOSED


class UpstreamTimeout(UpstreamError):
    code = REQUEST_TIMEOUT

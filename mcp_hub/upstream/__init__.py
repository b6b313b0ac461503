"""Connections to mounted MCP servers: the supervisor that keeps each up, and the path of a request to it.

A request goes down: `Upstream` (supervisor.py; a client's own session from pool.py) ->
`Connection` (connection.py: the deadline, the session's stamp, errors translated) -> the
transport's channel (channel.py; stdio.py, http.py), or the SDK session where a transport has
none (sse.py). transports.py opens a mount's transport by kind; relay.py carries the questions
a server asks back to the client whose request it serves.
"""

from mcp_hub.upstream.connection import CARRIED_EXTENSIONS, SKILLS_EXTENSION, UI_EXTENSION
from mcp_hub.upstream.relay import ClientAs, ClientCannotAnswer, Origin
from mcp_hub.upstream.supervisor import LIST_METHODS, State, Upstream

__all__ = [
    "CARRIED_EXTENSIONS",
    "LIST_METHODS",
    "SKILLS_EXTENSION",
    "UI_EXTENSION",
    "ClientAs",
    "ClientCannotAnswer",
    "Origin",
    "State",
    "Upstream",
]

"""How the hub's HTTP clients verify the servers they reach: one TLS context, made once, for all of them.

httpx2 makes a context of its own for each client it is given none, reading the CA certificates again: about
30 ms of CPU (on the event loop) and a few MiB for every session with a server mounted over HTTP (the hub's
own, each person's, each reconnection), every token request, every metadata fetch. `verifying()` makes it as
httpx2 would (`SSL_CERT_FILE` or `SSL_CERT_DIR` where set, else the system's certificates) when first asked,
and every client the hub makes is given that one. (The upstream leg's aiohttp keeps one of its own per process
already.)

httpcore sets the context's ALPN protocols as it opens each connection, the same list (HTTP/1.1) for every client
here; the clients of a serving hub all run on its event loop's thread, and the command's synchronous ones
(`mcp-hub add`'s registry and server card) run before any other.
"""

from __future__ import annotations

import ssl
from functools import cache

import httpx2


@cache
def verifying() -> ssl.SSLContext:
    """The context every HTTP client of the hub verifies servers' certificates with."""
    return httpx2.create_ssl_context()

"""The `mcp-hub` command's entry point: the program loaded with the garbage collector paused, then run.

Loading the hub and the SDK creates about 150,000 objects (modules, classes, the protocol's pydantic models)
that live as long as the process, and the collector would walk them again and again while they load: some 8%
of a start's CPU, on the path to the first server being started. So they load with the collector off; then
they are frozen (`gc.freeze`: out of the collector's generations, never walked again) and it is back on. A
full collection of a serving hub then skips them: about 40 ms less, each time one runs on the event loop.
"""

from __future__ import annotations

import gc


def main() -> None:
    gc.disable()
    try:
        from mcp_hub.cli import main as run
    finally:
        gc.freeze()
        gc.enable()
    run()

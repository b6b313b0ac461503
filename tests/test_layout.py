"""Dependencies point one way, floor by floor:

    errors, wire, scopes, allocator, shown, streams, state, tls, defaults, clients, sdk   (the ground floor)
    cluster (the Redis replicas share)
    config <- importer, config_reference (docs/configuration-reference.md)
    registry (an MCP server registry's API) <- server_json (a registry entry as a hub.toml table: importer's sandbox)
    observe, catalog, guardrails <- policy <- search; credentials, cache <- results
    auth
    upstream
    chain
    server
    live (reloading hub.toml)
    admin (the web console)
    hub <- library (the hub as a library) <- cli; starter (`mcp-hub init`: importer, upstream) <- cli
    providers (tool definitions, calls and results in model providers' formats; pure)

A package imports only from floors below it (its own modules are always allowed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_hub"

BASE = {"errors", "wire", "scopes", "allocator", "shown", "streams", "state", "tls"}

# module or package -> the mcp_hub modules and packages it may import
ALLOWED = {
    "errors": set(),
    "wire": set(),
    "scopes": set(),
    "allocator": set(),
    "shown": set(),
    "streams": set(),
    "state": set(),
    "tls": set(),
    "defaults": set(),
    "clients": set(),
    "config": {"errors", "state"},
    "importer": {"errors", "config", "defaults"},
    "config_reference": {"config"},
    "registry": {"errors", "config", "shown", "tls", "__init__"},
    "server_json": {"errors", "config", "importer", "registry", "shown"},
    "observe": {"errors", "config", "shown", "cluster", "__init__"},
    "catalog": {"errors", "config", "cluster", "state"},
    "search": {"errors", "config", "catalog", "policy"},
    "guardrails": {"errors", "config", "shown"},
    "policy": {"errors", "config", "shown", "guardrails"},
    "credentials": {"errors", "config", "cluster", "tls"},
    "sdk": set(),
    "cluster": set(),
    "cache": BASE | {"cluster"},
    "results": BASE | {"cache"},
    "auth": {"errors", "config", "policy", "tls"},
    "upstream": BASE | {"config", "observe", "sdk", "credentials", "__init__"},
    "chain": BASE
    | {"config", "observe", "catalog", "guardrails", "policy", "sdk", "upstream", "cache", "cluster", "results"},
    "server": BASE
    | {"config", "auth", "catalog", "search", "chain", "policy", "sdk", "upstream", "cluster", "results", "__init__"},
    "live": {"errors", "config"},
    "admin": {"errors", "config", "observe", "catalog", "policy", "upstream", "chain", "credentials", "cluster"}
    | {"auth", "tls", "__init__"},  # auth: single sign-on reads the identity provider's metadata and keys as auth/ does
    "hub": BASE
    | {"config", "auth", "observe", "catalog", "search", "guardrails", "policy", "credentials", "sdk", "upstream"}
    | {"chain", "server", "live", "cache", "cluster", "admin", "results"},
    "examples": set(),
    "providers": set(),
    "library": {"config", "hub", "providers", "server", "tls"},
    "starter": {"errors", "clients", "importer", "upstream"},
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcp_hub"):
            parts = node.module.split(".")
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from mcp_hub import naming` names modules; `__version__` lives in __init__
                found |= {
                    a.name if (PACKAGE / f"{a.name}.py").exists() or (PACKAGE / a.name).is_dir() else "__init__"
                    for a in node.names
                }
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("mcp_hub.")}
    return found


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_imports_point_one_way(module: str) -> None:
    target = PACKAGE / module
    files = sorted(target.rglob("*.py")) if target.is_dir() else [target.with_suffix(".py")]
    for file in files:
        imported = _imports(file) - {module}
        assert imported <= ALLOWED[module], f"{file.relative_to(PACKAGE)} imports {sorted(imported - ALLOWED[module])}"


def test_pure_modules_touch_no_io_or_sdk() -> None:
    for module in (
        "catalog/naming.py",
        "catalog/catalog.py",
        "policy/decide.py",
        "policy/constraints.py",
        "policy/compiled.py",
    ):
        source = (PACKAGE / module).read_text(encoding="utf-8")
        for forbidden in ("import mcp.", "from mcp ", "from mcp.", "import anyio", "open("):
            assert forbidden not in source, f"{module} uses {forbidden!r}"


def _module_graph() -> dict[str, set[str]]:
    """Each mcp_hub module (dotted) -> the mcp_hub modules it imports, `from package import submodule`
    resolved to the submodule; TYPE_CHECKING imports count too."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcp_hub"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("mcp_hub")}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_module_imports_itself_back() -> None:
    """No import cycle anywhere in the package, not even one only a type checker follows."""
    graph = _module_graph()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


DOORS = ("mcp_hub.server.stdio", "mcp_hub.server.http.handshake", "mcp_hub.server.http.modern")
"""The doors a request comes in by: they share the serving core (server/serving.py), never each other."""
CHANNELS = ("mcp_hub.upstream.stdio", "mcp_hub.upstream.http", "mcp_hub.upstream.sse")
"""The kinds of upstream channel: they share upstream/channel.py, never each other."""


@pytest.mark.slow
@pytest.mark.parametrize("siblings", [DOORS, CHANNELS], ids=["doors", "channels"])
def test_siblings_share_through_their_core(siblings: tuple[str, ...]) -> None:
    graph = _module_graph()
    for module in siblings:
        assert not graph[module] & set(siblings), f"{module} imports {sorted(graph[module] & set(siblings))}"

"""Dependencies point one way: errors <- config <- naming, policy, audit, telemetry <- upstream <- catalog
<- router <- chain <- server <- hub <- cli; `wire` (JSON writing), `scopes` (cancel scopes), `allocator` and
`shown` (text shown to a person) import nothing of the hub."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_hub"

# module -> the mcp_hub modules it may import (its own subpackage is always allowed)
ALLOWED = {
    "errors": set(),
    "wire": set(),
    "scopes": set(),
    "allocator": set(),
    "shown": set(),
    "naming": {"errors"},
    "config": {"errors"},
    "importer": {"errors", "config"},
    "telemetry": {"errors", "config", "__init__"},
    "upstream": {"errors", "config", "telemetry", "wire", "scopes", "__init__"},
    "catalog": {"naming"},
    "policy": {"config", "errors", "shown"},
    "router": {"catalog", "errors", "upstream"},
    "audit": {"errors", "shown"},
    "policy_store": {"errors", "policy"},
    "pins": {"errors"},
    "snapshot": {"config"},
    "chain": {"audit", "catalog", "errors", "policy", "shown", "telemetry", "upstream"},
    "server": {"catalog", "chain", "errors", "naming", "policy", "router", "upstream", "wire", "scopes", "__init__"},
    "hub": {
        "audit",
        "catalog",
        "chain",
        "config",
        "errors",
        "pins",
        "policy_store",
        "router",
        "server",
        "snapshot",
        "telemetry",
        "upstream",
    },
    "examples": set(),
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mcp_hub"):
            parts = node.module.split(".")
            if len(parts) > 1:
                found.add(parts[1])
            else:  # `from mcp_hub import naming` names modules; `__version__` lives in __init__
                found |= {a.name if (PACKAGE / f"{a.name}.py").exists() else "__init__" for a in node.names}
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
    for module in ("naming.py", "catalog.py", "policy/decide.py", "policy/constraints.py", "policy/compiled.py"):
        source = (PACKAGE / module).read_text(encoding="utf-8")
        for forbidden in ("import mcp.", "from mcp ", "from mcp.", "import anyio", "open("):
            assert forbidden not in source, f"{module} uses {forbidden!r}"

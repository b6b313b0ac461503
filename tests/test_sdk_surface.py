"""The SDK internals the hub names exist in the installed SDK, and only mcp_hub/sdk/ names them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mcp_hub import sdk

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_hub"


@pytest.mark.parametrize("entry", sdk.surface())
def test_every_sdk_internal_the_hub_names_exists(entry: str) -> None:
    sdk.resolve(entry)


def test_a_renamed_internal_is_caught() -> None:
    with pytest.raises(LookupError, match="no '_renamed_in_a_later_release'"):
        sdk.resolve("mcp.server.runner:ServerRunner._renamed_in_a_later_release")


def test_an_instance_attribute_counts_when_the_class_sets_it() -> None:
    """Attributes a class sets on its instances in `__init__` (or declares) are found; a renamed one is not."""
    sdk.resolve("mcp.server.streamable_http:StreamableHTTPServerTransport._request_streams")
    sdk.resolve("contextlib:AsyncExitStack._exit_callbacks")  # set by a base class
    with pytest.raises(LookupError, match="no '_request_streamz'"):
        sdk.resolve("mcp.server.streamable_http:StreamableHTTPServerTransport._request_streamz")


def test_install_is_idempotent() -> None:
    sdk.install()
    sdk.install()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _offences(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    found = [
        f"line {n}: pyright suppression" for n, line in enumerate(source.splitlines(), 1) if "reportPrivate" in line
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("mcp", "mcp_types"):
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: imports private module {node.module}")
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: imports {a.name}" for a in node.names if any(map(_private, a.name.split(".")))
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):  # the hub's own state
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.keyword) and node.arg is not None and _private(node.arg):
            found.append(f"line {node.value.lineno}: keyword {node.arg}=")
    return found


OUTSIDE = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.parent.name != "sdk")


@pytest.mark.parametrize("module", OUTSIDE)
def test_no_module_outside_sdk_names_a_private_sdk_attribute(module: str) -> None:
    """Outside mcp_hub/sdk/, no private name is reached on anything but the object's own `self`."""
    assert not _offences(PACKAGE / module)

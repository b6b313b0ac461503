"""The configuration reference, docs/configuration-reference.md, generated from the models in config.py.

Each table of hub.toml is one model (HubConfig and the models its fields hold); each key is listed with its
type, its default, its bounds and the attribute docstring written under it in config.py (read with `ast`,
so the models themselves are left as they are). Regenerate the file with

    python -m mcp_hub.config_reference > docs/configuration-reference.md

and tests/test_config_reference.py fails when the committed file is stale."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from mcp_hub import config

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "configuration-reference.md"
COMMAND = "python -m mcp_hub.config_reference > docs/configuration-reference.md"

# table heading -> the model its keys come from; tables in the order hub.toml shows them
TABLES: list[tuple[str, type[BaseModel]]] = [
    ("[hub]", config.HubSettings),
    ("[http]", config.HttpSettings),
    ("[servers.NAME]", config.ServerConfig),
    ("[servers.NAME.auth]", config.ServerAuth),
    ("[servers.NAME.tools.TOOL]", config.ToolOverride),
    ("[sandbox]", config.SandboxSettings),
    ("[skills]", config.SkillsSettings),
    ("[policy]", config.PolicySettings),
    ("[audit]", config.AuditFileSettings),
    ("[[audit.sinks]]", config.AuditSinkSettings),
    ("[auth]", config.AuthSettings),
    ("[auth.oauth]", config.OAuthSettings),
    ("[admin]", config.AdminSettings),
    ("[admin.oidc]", config.AdminOidc),
    ("[telemetry]", config.TelemetrySettings),
    ("[cache]", config.CacheSettings),
    ("[results]", config.ResultSettings),
    ("[search]", config.SearchSettings),
    ("[guardrails]", config.GuardrailsSettings),
    ("[cluster]", config.ClusterSettings),
    ("[endpoints.NAME]", config.EndpointSettings),
]

# table heading -> the page of docs/ that explains it
EXPLAINED = {
    "[hub]": "configuration.md",
    "[http]": "configuration.md",
    "[servers.NAME]": "configuration.md",
    "[servers.NAME.auth]": "configuration.md",
    "[servers.NAME.tools.TOOL]": "configuration.md",
    "[sandbox]": "sandbox.md",
    "[skills]": "skills.md",
    "[policy]": "policy.md",
    "[audit]": "audit.md",
    "[[audit.sinks]]": "audit.md",
    "[auth]": "policy.md",
    "[auth.oauth]": "oauth.md",
    "[admin]": "admin-console.md",
    "[admin.oidc]": "admin-console.md",
    "[telemetry]": "telemetry.md",
    "[cache]": "caching.md",
    "[results]": "results.md",
    "[search]": "tool-search.md",
    "[guardrails]": "guardrails.md",
    "[cluster]": "replicas.md",
    "[endpoints.NAME]": "endpoints.md",
}

# keys the loader fills in itself, not written in hub.toml
_NOT_WRITTEN = {(config.ServerConfig, "name"), (config.ServerConfig, "unusable")}

_BOUNDS = (
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "≤"),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.MinLen, "min_length", "length ≥"),
    (annotated_types.MaxLen, "max_length", "length ≤"),
)


def _docstrings(model: type[BaseModel]) -> tuple[str, dict[str, str]]:
    """The class docstring and the attribute docstrings of `model`, from its source."""
    tree = ast.parse(inspect.getsource(model))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, str] = {}
    for node, following in zip(body.body, [*body.body[1:], None], strict=True):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[node.target.id] = inspect.cleandoc(following.value.value)
    return inspect.cleandoc(ast.get_docstring(body) or ""), found


def _annotations(model: type[BaseModel]) -> dict[str, str]:
    """Each field's annotation as written in config.py."""
    tree = ast.parse(inspect.getsource(model))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    return {
        node.target.id: ast.unparse(node.annotation)
        for node in body.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else repr(value)
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return repr(value)


def _default(field: Any) -> str:
    if field.default is not PydanticUndefined:
        return _value(field.default)
    if field.default_factory is not None:
        return _value(field.default_factory())
    return "(required)"


def _bounds(field: Any) -> str:
    found = []
    for meta in field.metadata:
        for kind, attribute, sign in _BOUNDS:
            if isinstance(meta, kind):
                found.append(f"{sign} {getattr(meta, attribute)}")
        pattern = getattr(meta, "pattern", None)
        if pattern:
            found.append(f"matches `{pattern}`")
    return "; ".join(found)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(written: str) -> str:
    """The annotation in TOML's words: a list for a tuple, a table for a dict, strings in double quotes."""
    written = re.sub(r"Literal\[([^\]]*)\]", lambda m: " | ".join(m.group(1).replace("'", '"').split(", ")), written)
    written = re.sub(r"tuple\[(\w+), \.\.\.\]", r"list[\1]", written)
    written = re.sub(r"dict\[str, (\w+)\]", r"table of \1", written)
    written = written.replace("None", "none")
    # Private aliases (config._Seconds) read better as what they hold.
    alias = getattr(config, written, None) if written.startswith("_") else None
    if alias is not None and typing.get_origin(alias) is typing.Annotated:
        base = typing.get_args(alias)[0]
        return f"{base.__name__} (seconds)" if written == "_Seconds" else base.__name__
    return written


def render() -> str:
    """The whole reference, as committed in docs/configuration-reference.md."""
    lines = [
        "# hub.toml reference",
        "",
        "<!-- Generated from mcp_hub/config.py; do not edit. Regenerate with:",
        f"     {COMMAND} -->",
        "",
        "Every table and key hub.toml takes, with its type, its default and what it does, as the configuration",
        "model (`mcp_hub/config.py`) defines them. The annotated example and the explanations are in",
        "[configuration.md](configuration.md). `${VAR}` references in values are expanded from the environment",
        "(and `[hub] env_file`); unknown keys are refused.",
        "",
    ]
    lines += [f"- [`{heading}`](#{_anchor(heading)})" for heading, _ in TABLES]
    lines.append("")
    for heading, model in TABLES:
        doc, docs = _docstrings(model)
        written = _annotations(model)
        lines += [f"## `{heading}`", ""]
        if doc:
            lines += [doc, ""]
        page = EXPLAINED[heading]
        lines += [f"Explained, with examples, in [{page}]({page}).", ""]
        lines += ["| Key | Type | Default | Bounds | Description |", "| --- | --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            if (model, name) in _NOT_WRITTEN:
                continue
            annotation = field.annotation
            if (isinstance(annotation, type) and issubclass(annotation, BaseModel)) or _is_optional_model(annotation):
                continue  # a sub-table, listed under its own heading
            kind = _type(written.get(name, str(annotation)))
            row = [f"`{name}`", f"`{kind}`", f"`{_default(field)}`", _bounds(field), docs.get(name, "")]
            lines.append("| " + " | ".join(_cell(cell) for cell in row) + " |")
        lines.append("")
    return "\n".join(lines)


def _is_optional_model(annotation: Any) -> bool:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return any(isinstance(a, type) and issubclass(a, BaseModel) for a in typing.get_args(annotation))
    return False


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading `heading` written in backticks."""
    return "".join(c for c in heading.lower().replace(" ", "-") if c.isalnum() or c in "-_")


def main() -> None:
    sys.stdout.buffer.write(render().encode("utf-8"))


if __name__ == "__main__":
    main()

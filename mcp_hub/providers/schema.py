"""JSON Schemas of MCP tools made acceptable to each provider (pure; no I/O).

- `resolved`: local `$ref`s (`#/$defs/X`, `#/definitions/X`) inlined, `$defs` dropped; a recursive or
  non-local reference is a SchemaError naming the tool's path to it.
- `gemini_schema`: Gemini's OpenAPI subset (its `Schema` type): upper-case `type`, `nullable` for a
  null branch or type, `anyOf` alone on its node, only the keys Gemini reads, `required` naming only
  declared properties, `enum` of strings only.
- `openai_strict`: the schema under OpenAI's strict mode, or None when strict mode cannot say the
  same thing (an optional property, a keyword strict mode refuses, a free-form object).
"""

from __future__ import annotations

import copy
import json
from typing import Any

JSON = dict[str, Any]


class SchemaError(ValueError):
    """A tool's input schema cannot be expressed in a provider's schema rules."""


def input_schema(schema: JSON | None) -> JSON:
    """A tool's input schema as every provider wants it at the top: an object, without `$schema`."""
    schema = {k: v for k, v in (schema or {}).items() if k != "$schema"}
    schema.setdefault("type", "object")
    if schema["type"] == "object":
        schema.setdefault("properties", {})
    return schema


def resolved(schema: JSON) -> JSON:
    """`schema` with its local references inlined and its definitions dropped."""
    definitions = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def walk(node: Any, path: str, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, f"{path}/{i}", seen) for i, item in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            prefix = next((p for p in ("#/$defs/", "#/definitions/") if str(ref).startswith(p)), None)
            if prefix is None or ref[len(prefix) :] not in definitions:
                raise SchemaError(f"{path}: reference {ref!r} is not a local definition")
            if ref in seen:
                raise SchemaError(f"{path}: reference {ref!r} is recursive, which this provider cannot express")
            target = walk(definitions[ref[len(prefix) :]], path, (*seen, ref))
            rest = {k: walk(v, f"{path}/{k}", seen) for k, v in node.items() if k != "$ref"}
            return {**target, **rest}
        return {k: walk(v, f"{path}/{k}", seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    return walk(schema, "#", ())


GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object"}
_GEMINI_KEYS = {
    "description", "format", "title", "minItems", "maxItems", "minimum", "maximum",
    "minLength", "maxLength", "pattern", "minProperties", "maxProperties", "example", "default",
}  # fmt: skip
_GEMINI_STRING_FORMATS = {"enum", "date-time"}


def gemini_schema(schema: JSON) -> JSON:
    """`schema` (already `resolved`) in Gemini's subset."""
    return _gemini(schema, "#")


def _gemini(node: Any, path: str) -> JSON:
    if not isinstance(node, dict):  # `true` (anything): Gemini has no "any"; a string is what a model can send
        return {"type": "STRING"}
    node = dict(node)
    if "const" in node:
        node.setdefault("enum", [node.pop("const")])
    for combinator in ("oneOf", "anyOf"):
        if combinator in node:
            branches = node.pop(combinator)
            rest = {k: v for k, v in node.items() if k not in ("type",)}
            return _gemini_union([{**rest, **b} if isinstance(b, dict) else b for b in branches], path, node)
    if "allOf" in node:
        merged: JSON = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            if not isinstance(part, dict):
                continue
            merged.setdefault("properties", {}).update(part.get("properties", {}))
            merged["required"] = [*merged.get("required", []), *part.get("required", [])]
            merged.update({k: v for k, v in part.items() if k not in ("properties", "required")})
        if not merged.get("properties"):
            merged.pop("properties", None)
        if not merged.get("required"):
            merged.pop("required", None)
        return _gemini(merged, path)
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        out = _gemini_union([{**node, "type": k} for k in kinds], path, node) if kinds else {"type": "STRING"}
        if "null" in kind:
            _nullable(out)
        return out
    if kind is None:
        kind = "object" if "properties" in node else "array" if "items" in node else "string"
    if kind == "null":
        return {"type": "STRING", "nullable": True}
    if kind not in GEMINI_TYPES:
        raise SchemaError(f"{path}: type {kind!r} is not a JSON Schema type")
    out = {"type": kind.upper()}
    out.update({k: v for k, v in node.items() if k in _GEMINI_KEYS})
    if "format" in out and (kind != "string" or out["format"] not in _GEMINI_STRING_FORMATS):
        del out["format"]
    if "enum" in node:
        values = [v for v in node["enum"] if v is not None]
        if kind == "string" or all(isinstance(v, str) for v in values):
            out.update(type="STRING", enum=[str(v) for v in values])
        else:  # Gemini's enum is for strings only: keep the values for the model to read
            note = "One of: " + ", ".join(str(v) for v in values)
            out["description"] = f"{out['description']} ({note})" if out.get("description") else note
        if None in node["enum"]:
            out["nullable"] = True
    if kind == "array":
        out["items"] = _gemini(node.get("items", True), f"{path}/items")
    if kind == "object":
        properties = node.get("properties") or {}
        if properties:
            out["properties"] = {k: _gemini(v, f"{path}/properties/{k}") for k, v in properties.items()}
            required = [k for k in node.get("required", []) if k in properties]
            if required:
                out["required"] = required
    return out


def _gemini_union(branches: list[Any], path: str, node: JSON) -> JSON:
    nullable = any(isinstance(b, dict) and b.get("type") == "null" for b in branches)
    kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
    converted = [_gemini(b, f"{path}/anyOf/{i}") for i, b in enumerate(kept)]
    if not converted:
        out: JSON = {"type": "STRING"}
    elif len(converted) == 1:
        out = converted[0]
    else:
        out = {"anyOf": converted}  # alone on its node, as Gemini wants it
    if nullable:
        _nullable(out)
    if "description" in node and "anyOf" not in out:
        out.setdefault("description", node["description"])
    return out


def _nullable(schema: JSON) -> None:
    for branch in schema.get("anyOf", [schema]):
        branch["nullable"] = True


def gemini_problems(schema: Any, path: str = "#") -> list[str]:
    """Where `schema` breaks Gemini's rules as this module knows them (empty: none)."""
    if not isinstance(schema, dict):
        return [f"{path}: not an object"]
    problems: list[str] = []
    if "anyOf" in schema:
        if set(schema) - {"anyOf"}:
            problems.append(f"{path}: anyOf has siblings {sorted(set(schema) - {'anyOf'})}")
        for i, branch in enumerate(schema["anyOf"]):
            problems += gemini_problems(branch, f"{path}/anyOf/{i}")
        return problems
    allowed = _GEMINI_KEYS | {"type", "nullable", "enum", "items", "properties", "required"}
    problems += [f"{path}: key {key!r} is not in Gemini's schema" for key in set(schema) - allowed]
    kind = schema.get("type")
    if kind not in {k.upper() for k in GEMINI_TYPES}:
        problems.append(f"{path}: type {kind!r}")
    if "enum" in schema and (kind != "STRING" or not all(isinstance(v, str) for v in schema["enum"])):
        problems.append(f"{path}: enum on a {kind} or with values that are not strings")
    if kind == "ARRAY":
        problems += gemini_problems(schema.get("items"), f"{path}/items")
    for key in schema.get("required", []):
        if key not in schema.get("properties", {}):
            problems.append(f"{path}: required {key!r} is not a property")
    for key, value in schema.get("properties", {}).items():
        problems += gemini_problems(value, f"{path}/properties/{key}")
    return problems


_STRICT_KEYS = {
    "type", "description", "title", "properties", "required", "additionalProperties", "items", "enum",
    "const", "anyOf", "$defs", "$ref", "pattern", "format", "multipleOf", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "minItems", "maxItems",
}  # fmt: skip


def openai_strict(schema: JSON) -> JSON | None:
    """`schema` under OpenAI's strict mode (every object closed, every property required), or None when
    strict mode cannot say what the tool accepts: a free-form object, a keyword strict mode does not
    support, an optional property that already takes null, or one inside a `$ref`. An optional property
    becomes required and nullable: the model sends null for "left out", and `absent_nulls` drops those
    nulls before the call."""
    out = copy.deepcopy(schema)
    referenced = "$ref" in json.dumps(schema)

    def walk(node: Any) -> bool:
        if isinstance(node, list):
            return all(walk(item) for item in node)
        if not isinstance(node, dict):
            return False
        if set(node) - _STRICT_KEYS:
            return False
        kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "object" in kinds:
            properties = node.get("properties")
            if not properties or node.get("additionalProperties") not in (None, False):
                return False
            optional = [k for k in properties if k not in node.get("required", [])]
            if optional and referenced:
                return False
            for key in optional:
                if not _nullable_json(properties[key]):
                    return False
            node["required"] = list(properties)
            node["additionalProperties"] = False
            return all(walk(v) for v in properties.values())
        if "array" in kinds and not walk(node.get("items")):
            return False
        if "anyOf" in node and not walk(node["anyOf"]):
            return False
        return all(walk(v) for v in node.get("$defs", {}).values())

    return out if walk(out) else None


def _nullable_json(node: Any) -> bool:
    """Let `node` (a JSON Schema, changed in place) also take null; False when it takes null already
    or has no place to say so."""
    if not isinstance(node, dict) or _takes_null(node):
        return False
    kind = node.get("type")
    if isinstance(kind, str):
        node["type"] = [kind, "null"]
    elif isinstance(kind, list):
        node["type"] = [*kind, "null"]
    elif "anyOf" in node:
        node["anyOf"] = [*node["anyOf"], {"type": "null"}]
    else:
        return False
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
    return True


def _takes_null(node: JSON) -> bool:
    kind = node.get("type")
    return (
        kind == "null"
        or (isinstance(kind, list) and "null" in kind)
        or None in node.get("enum", [0])
        or any(isinstance(b, dict) and _takes_null(b) for b in node.get("anyOf", []))
    )


def absent_nulls(schema: JSON, arguments: Any) -> Any:
    """`arguments` without the nulls a strict-mode model sent for optional properties of `schema` (the
    server's own schema) that do not take null."""
    if isinstance(arguments, list) and isinstance(schema.get("items"), dict):
        return [absent_nulls(schema["items"], item) for item in arguments]
    if not isinstance(arguments, dict) or not isinstance(schema.get("properties"), dict):
        return arguments
    properties, required = schema["properties"], set(schema.get("required", []))
    out = {}
    for key, value in arguments.items():
        spec = properties.get(key)
        if not isinstance(spec, dict):
            out[key] = value
        elif value is None and key not in required and not _takes_null(spec):
            continue
        else:
            out[key] = absent_nulls(spec, value)
    return out

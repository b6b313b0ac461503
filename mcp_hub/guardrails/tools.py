"""Tool poisoning: a tool definition that says something to the model that a person does not see or expect.

A tool's name, title, description and schemas (every string in them, descriptions of parameters
included) are scanned with the given detectors (usually "hidden": HTML comments, tag characters,
bidi controls, zero-width characters; and "instructions": wording aimed at the model). What is found
is told as a reason, by detector, kind and place, never by value: "hidden text: html_comment in
description; tag_characters in inputSchema/properties/a/description; instructions to the model:
concealment in description".
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from mcp_hub.guardrails.scan import Detectors, scan_value

SCANNED = ("name", "title", "description", "inputSchema", "outputSchema")
_LABELS = {"hidden": "hidden text", "instructions": "instructions to the model"}
_ORDER = {detector: index for index, detector in enumerate(_LABELS)}


def poisoned(tool: Mapping[str, Any], detectors: Detectors, names: Collection[str]) -> str | None:
    """Why the tool looks poisoned (what the detectors found, and where), or None."""
    if not names:
        return None
    definition = {key: tool[key] for key in SCANNED if key in tool}
    _, scan = scan_value(definition, lambda text: detectors.find(text, names), skip=())
    if not scan.hits:
        return None
    found: dict[str, dict[str, list[str]]] = {}
    for path, match in scan.hits:
        place = "/".join(str(step) for step in path)
        for detector, kind in match.found:
            kinds = found.setdefault(detector, {}).setdefault(place, [])
            if kind not in kinds:
                kinds.append(kind)
    return "; ".join(
        f"{_LABELS.get(detector, detector)}: "
        + "; ".join(f"{', '.join(kinds)} in {place}" for place, kinds in places.items())
        for detector, places in sorted(found.items(), key=lambda item: _ORDER.get(item[0], len(_ORDER)))
    )

"""Guardrails: what in a call's arguments or results is a secret, personal data or hidden text.

Pure: no I/O, no SDK, no configuration read here (the hub passes its own secret values and its phone
regions in).
Detectors return typed matches (`Match`: detector, kind, span), never copies of the values, so
what they find can be counted, audited and redacted without being logged. The policy decides
what happens to a match (policy/: guards); the chain enforces it (chain/guardrails.py).

```
matches.py   Match, widening a match to its whole token, merging overlapping matches (each keeps every
             detector's finding), redaction with [REDACTED:<kind>]
secrets.py   detect-secrets' plugins and a few formats it lacks, high-entropy strings, the hub's own secret values
personal.py  card numbers (Luhn), IBANs and national IDs (python-stdnum), phones in international form and in
             the national form of given regions (phonenumbers), e-mail
hidden.py    tag characters, bidi controls, zero-width characters, HTML comments
instructions.py  wording aimed at the model: overriding its instructions, hiding from the user, posing markup,
             credential files, rules for other tools
scan.py      detectors by name (long texts in pieces where a match cannot span lines), and a scan of a
             JSON value (its object keys too) that redacts in a copy, walked once where nothing is found
tools.py     tool poisoning: hidden text or instructions to the model in a tool's definition
```
"""

from __future__ import annotations

from mcp_hub.guardrails.matches import Match, marker, merged, redacted
from mcp_hub.guardrails.scan import (
    BINARY_KEYS,
    DETECTORS,
    GROUPS,
    NAMES,
    Detectors,
    Scan,
    expand,
    scan_texts,
    scan_value,
    texts_of,
)
from mcp_hub.guardrails.tools import poisoned

__all__ = [
    "BINARY_KEYS",
    "DETECTORS",
    "GROUPS",
    "NAMES",
    "Detectors",
    "Match",
    "Scan",
    "expand",
    "marker",
    "merged",
    "poisoned",
    "redacted",
    "scan_texts",
    "scan_value",
    "texts_of",
]

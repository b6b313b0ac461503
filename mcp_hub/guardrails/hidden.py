"""Hidden text: what a model reads and a person does not see.

- `tag_characters`: Unicode tags U+E0000-U+E007F, which spell ASCII invisibly ("ASCII smuggling");
- `bidi_control`: the bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069)
  and the marks U+200E, U+200F, U+061C, which reorder what a reader sees;
- `zero_width`: U+200B, U+2060, U+FEFF (not as a text's first character, where it is a byte-order mark),
  U+180E, and the joiners U+200C/U+200D outside words and emoji (between two letters or symbols of scripts
  and emoji that use them, e.g. a family emoji or Persian text, they are ordinary text and not reported);
- `html_comment`: `<!-- ... -->`, which rendered Markdown and HTML do not show (an unclosed one runs to
  the end of the text).

Runs of adjacent hidden characters are reported as one match.
"""

from __future__ import annotations

import re

from mcp_hub.guardrails.matches import Match

DETECTOR = "hidden"

_TAGS = re.compile("[\U000e0000-\U000e007f]+")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]+")
_ZERO_WIDTH = re.compile("[\u200b\u2060\ufeff\u180e\u200c\u200d]+")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_JOINERS = frozenset("\u200c\u200d")


def _joins(text: str, start: int, end: int) -> bool:
    """A run of joiners only, between two non-ASCII letters or symbols: ordinary text (emoji, Persian, Indic)."""
    if not set(text[start:end]) <= _JOINERS or start == 0 or end == len(text):
        return False
    before, after = text[start - 1], text[end]
    return ord(before) > 0x7F and ord(after) > 0x7F and not before.isspace() and not after.isspace()


def find_hidden(text: str) -> list[Match]:
    found = [Match(DETECTOR, "tag_characters", m.start(), m.end()) for m in _TAGS.finditer(text)]
    found += [Match(DETECTOR, "bidi_control", m.start(), m.end()) for m in _BIDI.finditer(text)]
    for m in _ZERO_WIDTH.finditer(text):
        start = 1 if m.start() == 0 and text[0] == "\ufeff" else m.start()
        if start < m.end() and not _joins(text, start, m.end()):
            found.append(Match(DETECTOR, "zero_width", start, m.end()))
    if "<!--" in text:
        found += [Match(DETECTOR, "html_comment", m.start(), m.end()) for m in _COMMENT.finditer(text)]
    return found

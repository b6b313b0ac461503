"""Text shown to a person: deceiving characters escaped, ordinary text of any script kept."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_hub.shown import shown, shown_json

DECEIVING = {
    "invoice\u202efdp.exe": "invoice\\u202efdp.exe",  # RIGHT-TO-LEFT OVERRIDE: reads as "invoiceexe.pdf"
    "a\u2066b\u2069c": "a\\u2066b\\u2069c",  # LEFT-TO-RIGHT ISOLATE, POP DIRECTIONAL ISOLATE
    "\u200fx": "\\u200fx",  # RIGHT-TO-LEFT MARK
    "rm\u200b -rf": "rm\\u200b -rf",  # ZERO WIDTH SPACE
    "a\u2060b\ufeffc\u00add": "a\\u2060b\\ufeffc\\u00add",  # WORD JOINER, BOM, SOFT HYPHEN
    "ok\U000e0041\U000e0042": "ok\\U000e0041\\U000e0042",  # tag characters: hidden ASCII
    "one\u2028two\u2029three": "one\\u2028two\\u2029three",  # LINE / PARAGRAPH SEPARATOR
    "\x1b[2Jgone": "\\u001b[2Jgone",  # C0: a terminal escape
    "\x9b2Jgone": "\\u009b2Jgone",  # C1: CONTROL SEQUENCE INTRODUCER
    "a\x7fb": "a\\u007fb",  # DEL
    "tab\there\nline": "tab\\u0009here\\u000aline",
    "\ud800": "\\ud800",  # a lone surrogate
    "\ue000": "\\ue000",  # private use
    "\U000e0fff": "\\U000e0fff",  # unassigned (and default ignorable)
    "\u3164name": "\\u3164name",  # HANGUL FILLER: a letter that shows nothing
    "a\u034fb": "a\\u034fb",  # COMBINING GRAPHEME JOINER
    "x\ufe0f\ufe0e\ufe0f": "x\ufe0f\\ufe0e\\ufe0f",  # one variation selector varies x; a run hides text
    "\ufe0fx": "\\ufe0fx",  # a variation selector with nothing to vary
    " \ufe0f": " \\ufe0f",
}

READABLE = [
    "plain ASCII, with 'quotes' and \\backslashes",
    "café, naïve, Ærø",
    "日本語のファイル.txt",
    "עברית ועربي",  # right-to-left scripts read right to left on their own: no control needed
    "❤\ufe0f and \U0001f44d\U0001f3fd",  # emoji presentation selector, skin tone modifier
    "\u00a0non-breaking and\u3000ideographic spaces",
    "e\u0301 combining acute",
    "",
]


@pytest.mark.parametrize(("text", "expected"), DECEIVING.items(), ids=[repr(t) for t in DECEIVING])
def test_deceiving_characters_are_escaped(text: str, expected: str) -> None:
    assert shown(text) == expected


@pytest.mark.parametrize("text", READABLE)
def test_ordinary_text_is_kept(text: str) -> None:
    assert shown(text) == text
    assert shown_json({"name": text}) == json.dumps({"name": text}, ensure_ascii=False)


def test_json_escapes_beyond_the_bmp_are_surrogate_pairs() -> None:
    assert shown("\U000e0041", json_escapes=True) == "\\udb40\\udc41"
    assert json.loads(shown_json("\U000e0041")) == "\U000e0041"


def test_a_backslash_in_json_is_told_apart_from_an_escape() -> None:
    """A name that spells an escape is quoted as JSON does, so the person sees which is which."""
    assert shown_json(["a\\u202eb", "a\u202eb"]) == '["a\\\\u202eb", "a\\u202eb"]'


_ESCAPED = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text()),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(), children, max_size=3)),
    max_leaves=8,
)


_IGNORABLE_LETTERS_AND_MARKS = [
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),
    (0xFE00, 0xFE0F),
    (0xE0100, 0xE01EF),
]


def _plain(char: str) -> bool:
    if unicodedata.category(char) in _ESCAPED:
        return False
    return not any(low <= ord(char) <= high for low, high in _IGNORABLE_LETTERS_AND_MARKS)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.text())
def test_nothing_that_deceives_is_left_and_the_rest_is_kept(text: str) -> None:
    result = shown(text)
    assert not any(unicodedata.category(char) in _ESCAPED for char in result)
    if all(_plain(char) for char in text):
        assert result == text


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(json_values)
def test_shown_json_is_json_of_the_same_value(value: Any) -> None:
    text = shown_json(value)
    assert json.loads(text) == value
    assert not any(unicodedata.category(char) in _ESCAPED for char in text)

"""Text shown to a person, with the characters that would deceive them escaped.

A confirmation quotes a call's arguments and a server's names to a person, who decides on
what they read. Some characters change what a text reads as without showing themselves: a
right-to-left override makes `invoice\\u202efdp.exe` read as `invoiceexe.pdf`; a zero-width
space or a tag character hides inside a word; a line separator or a control character
rearranges the lines around it. Such characters are shown as escapes (`\\u202e`), which the
person can see; ordinary text, in any script (é, 日本, emoji), stays as it is.

Escaped: control characters (C0, DEL, C1), format characters (Unicode category Cf: the bidi
controls, zero-width characters, tag characters, the soft hyphen), line and paragraph
separators, surrogates, private-use and unassigned code points, and the other code points
Unicode says are "default ignorable" (invisible when not supported: Hangul fillers, the
combining grapheme joiner, Mongolian free variation selectors). A variation selector is kept
right after a character it can vary (the emoji presentation of ❤️), and escaped anywhere
else: a run of them can carry hidden text.

Pure: no I/O, no imports of the hub.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Control, format, surrogate, private use, unassigned; line and paragraph separators."""

_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")
"""The default-ignorable code points (Unicode's DerivedCoreProperties) that are letters or marks, not in
`_ESCAPED_CATEGORIES`: the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian
free variation selectors, variation selectors."""

_VARIATION_SELECTOR = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def shown(text: str, *, json_escapes: bool = False) -> str:
    """`text` with its deceiving characters escaped: `\\u202e`, or `\\U000e0041` beyond the BMP (with
    `json_escapes`, a JSON surrogate pair `\\udb40\\udc41`, so that JSON text stays JSON)."""
    if text.isprintable() and (text.isascii() or _IGNORABLE.search(text) is None):
        return text  # nearly always: one pass in C (`isascii` is a flag: what `_IGNORABLE` finds is not ASCII)
    out: list[str] = []
    varies = False  # whether the previous character, kept as it is, may take a variation selector
    for char in text:
        selector = _VARIATION_SELECTOR.match(char) is not None
        if selector and varies:
            out.append(char)
            varies = False
        elif selector or _IGNORABLE.match(char) or unicodedata.category(char) in _ESCAPED_CATEGORIES:
            out.append(_escape(ord(char), json_escapes))
            varies = False
        else:
            out.append(char)
            varies = not char.isspace()
    return "".join(out)


def shown_json(value: Any) -> str:
    """`value` as JSON for a person: non-ASCII kept readable, deceiving characters escaped (still JSON)."""
    return shown(json.dumps(value, ensure_ascii=False, default=repr), json_escapes=True)


def _escape(code: int, json_escapes: bool) -> str:
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    if not json_escapes:
        return f"\\U{code:08x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"

"""A server's icons for an item (`icons` of a tool, prompt, resource or template), as the console shows them.

Icons are data, never active content: an icon whose `src` is a `data:` URI of a raster image or of SVG (base64,
or an SVG written out) is drawn as an `<img>` from that URI, which the page's Content-Security-Policy allows
(`img-src 'self' data:`) and nothing else: no icon makes the console fetch anything from anywhere. A browser
draws an SVG given to `<img>` as a picture, without its scripts and without loading what it links to. Any other
icon (an `https:` URL, a `data:` URI of another type, one too long) is shown as its text, never as a link.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape
from typing import Any, cast

MAX_DATA_URI = 64 * 1024
"""The longest `data:` URI drawn (characters); a longer one is named, not drawn."""

_IMAGE_TYPES = "png|jpeg|gif|webp|avif|bmp|x-icon|vnd\\.microsoft\\.icon|svg\\+xml"
_DRAWN = re.compile(
    rf"data:image/(?:{_IMAGE_TYPES})(?:;[A-Za-z0-9_.=+-]+)*;base64,[A-Za-z0-9+/]*={{0,2}}"
    r"|data:image/svg\+xml(?:;[A-Za-z0-9_.=+-]+)*,[\s\S]*",
    re.IGNORECASE,
)
_SHOWN_CHARS = 120
"""How much of an icon not drawn is shown as text."""


def icons(value: Any) -> tuple[str, str]:
    """The HTML of an item's `icons` (escaped): those drawn (`<img>`, to put before its name), and those shown as
    their text (below it); empty strings when it has none, or they are not a list of icons."""
    sources = [icon.get("src") for icon in _listed(value)]
    sources = [src for src in sources if isinstance(src, str) and src]
    pictures = "".join(
        f'<img class="icon" src="{escape(src, quote=True)}" alt="" width="20" height="20">'
        for src in sources
        if drawn(src)
    )
    texts = "".join(
        f'<code class="icon-src" title="an icon, not loaded by the console">{escape(_cut(src), quote=True)}</code>'
        for src in sources
        if not drawn(src)
    )
    return (
        f'<span class="icons">{pictures}</span>' if pictures else "",
        f'<div class="icon-sources">{texts}</div>' if texts else "",
    )


def drawn(src: str) -> bool:
    """Whether the console draws an icon of this `src`: an image's `data:` URI, short enough."""
    return len(src) <= MAX_DATA_URI and _DRAWN.fullmatch(src) is not None


def _listed(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [cast(Mapping[str, Any], icon) for icon in cast(list[Any], value) if isinstance(icon, Mapping)]


def _cut(src: str) -> str:
    return src if len(src) <= _SHOWN_CHARS else f"{src[:_SHOWN_CHARS]}… ({len(src)} characters)"

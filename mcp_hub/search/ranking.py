"""Ranking tools for a request: BM25 over their words, a static embedding, and the two fused.

BM25 finds a tool whose own words the request uses ("list my git branches"); a person often
uses other words ("what branches do I have", "undo my last commit"), which the embedding of
wordllama (a 256-dimension static model whose weights ship in its wheel: no network, no
download) places near the tool's description; both read the request with the tools' words for
its everyday words added (lexicon.py: "PR" is a pull request). With the `search-model` extra, a sentence
model (model.py: all-MiniLM-L6-v2, which reads the request as a sentence, not as averaged words) ranks as
well. `Ranker.rank` fuses the orders by reciprocal rank fusion; with neither embedding installed, BM25
alone ranks.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from mcp_hub.search import model
from mcp_hub.search.lexicon import expand

logger = logging.getLogger("mcp_hub.search")

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""Words of a text, `camelCase`, `snake_case` and `kebab-case` split apart."""

# fmt: off
_STOP = frozenset({
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "from", "with", "by", "at", "as", "is", "are",
    "be", "it", "its", "this", "that", "these", "those", "my", "me", "i", "you", "your", "we", "our", "us", "what",
    "whats", "which", "who", "how", "do", "does", "did", "can", "could", "would", "should", "please", "there",
    "here", "all", "any", "some", "up", "out", "into", "about", "over"
})
# fmt: on

_DESCRIPTION_CHARS = 600
"""How much of a description the ranking reads: the first sentences say what a tool does; the rest, how."""

RRF_K = 60
"""Reciprocal rank fusion's constant: a tool's fused score is the sum of 1 / (RRF_K + rank) over the rankers."""

EMBEDDING_WEIGHT = 2.0
"""The embedding's share of the fused score against BM25's 1.0 (it finds more of what people ask for: see
benchmarks/results/2026-11-26-search.md)."""

MODEL_WEIGHT = 3.0
"""The sentence model's share of the fused score against BM25's 1.0 (chosen on the tuned and held-out sets:
see benchmarks/results/2026-11-26-search-model.md)."""

METHODS = ("hybrid", "embedding", "bm25", "wordllama", "minilm")
"""How tools are ranked: "hybrid", BM25 fused with every embedding installed (the sentence model of the
`search-model` extra, wordllama of the `search` extra); "embedding", the embeddings alone; "bm25", BM25
alone; "wordllama" or "minilm", BM25 fused with that embedding only. What is not installed is left out,
down to BM25 alone."""

_EMBEDDINGS = {
    "hybrid": ("minilm", "wordllama"),
    "embedding": ("minilm", "wordllama"),
    "bm25": (),
    "wordllama": ("wordllama",),
    "minilm": ("minilm",),
}
_WEIGHTS = {"wordllama": EMBEDDING_WEIGHT, "minilm": MODEL_WEIGHT}


@cache
def _english() -> Any:
    """The English Snowball stemmer, loaded with the first word stemmed: `snowballstemmer` loads the stemmers of
    all its languages (about 0.1 s), which a hub that never ranks tools does not need."""
    import snowballstemmer

    return snowballstemmer.stemmer("english")


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    return _english().stemWord(word)


def words(text: str) -> list[str]:
    """The stemmed words of `text` that say something (not stop words)."""
    found = [word.lower() for word in _WORD.findall(text)]
    return [_stem(word) for word in found if word not in _STOP]


def tool_text(tool: Mapping[str, Any]) -> str:
    """What a tool is found by: its name as words, its title, the start of its description, and the names and
    descriptions of its arguments."""
    name = str(tool.get("name", ""))
    parts = [re.sub(r"[_\-]+", " ", name), str(tool.get("title") or "")]
    parts.append(str(tool.get("description") or "")[:_DESCRIPTION_CHARS])
    schema = tool.get("inputSchema")
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if isinstance(properties, Mapping):
        for key, spec in list(properties.items())[:20]:
            parts.append(re.sub(r"[_\-]+", " ", str(key)))
            if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
                parts.append(spec["description"][:120])
    return ". ".join(part for part in parts if part)


class BM25:
    """Okapi BM25 over documents given as word lists."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        self._k1, self._b = k1, b
        self._counts = [Counter(document) for document in documents]
        self._lengths = [len(document) for document in documents]
        self._average = (sum(self._lengths) / len(documents)) if documents else 0.0
        frequency: Counter[str] = Counter()
        for counts in self._counts:
            frequency.update(counts.keys())
        n = len(documents)
        self._idf = {word: math.log(1 + (n - df + 0.5) / (df + 0.5)) for word, df in frequency.items()}

    def scores(self, query: Sequence[str]) -> list[float]:
        """Each document's score for `query` (0 when it shares no word with it)."""
        terms = [term for term in set(query) if term in self._idf]
        scores = [0.0] * len(self._counts)
        if not terms or not self._average:
            return scores
        k1, b = self._k1, self._b
        for position, (counts, length) in enumerate(zip(self._counts, self._lengths, strict=True)):
            norm = k1 * (1 - b + b * length / self._average)
            score = 0.0
            for term in terms:
                tf = counts.get(term)
                if tf:
                    score += self._idf[term] * tf * (k1 + 1) / (tf + norm)
            scores[position] = score
        return scores


def embedding_available() -> bool:
    """Whether wordllama (the `search` extra) is installed."""
    return find_spec("wordllama") is not None


def model_available() -> bool:
    """Whether the sentence model (the `search-model` extra) is installed."""
    return model.available()


@cache
def _model() -> Any:
    """wordllama's 256-dimension model, from the files its wheel ships (never downloaded).

    Its loader looks for the tokenizer under `tokenizer/` of the package and then under
    `tokenizers/` of `cache_dir`; the wheel ships it under `tokenizers/`, so `cache_dir` is the
    package itself.
    """
    import wordllama

    package = Path(wordllama.__file__).parent
    return wordllama.WordLlama.load(config="l2_supercat", dim=256, cache_dir=package, disable_download=True)


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")

_SENTENCES = 6
"""How many sentences of a description are embedded one by one (see `segments`)."""

WHOLE_WEIGHT = 0.5
"""The whole text's share of a tool's embedding score, against its best sentence's 1.0."""


def segments(tool: Mapping[str, Any]) -> list[str]:
    """The parts of a tool that are embedded one by one: its name with each of the first sentences of its
    description. A static embedding averages the words of what it embeds, so a request about one thing a
    tool does is nearer the sentence that says it than the whole description."""
    name = re.sub(r"[_\-]+", " ", str(tool.get("name", "")))
    title = str(tool.get("title") or "")
    head = f"{name}. {title}".strip(". ") if title else name
    description = str(tool.get("description") or "")[:_DESCRIPTION_CHARS]
    sentences = [part.strip() for part in _SENTENCE.split(description) if part.strip()][:_SENTENCES]
    return [f"{head}. {sentence}" for sentence in sentences] or [head]


def _wordllama() -> Callable[[list[str]], Any]:
    return _model().embed


def _minilm() -> Callable[[list[str]], Any]:
    return model.embedder().embed


_EMBEDDERS: dict[str, Callable[[], Callable[[list[str]], Any]]] = {"wordllama": _wordllama, "minilm": _minilm}


class Embedding:
    """The tools' embeddings (computed once, here), and their similarity to a request: the similarity of the
    tool's best-matching segment (`segments`), plus `WHOLE_WEIGHT` times that of its whole text. `embed`
    gives texts' vectors (wordllama's by default)."""

    def __init__(
        self,
        tools: Sequence[Mapping[str, Any]],
        texts: Sequence[str],
        embed: Callable[[list[str]], Any] | None = None,
    ) -> None:
        import numpy as np

        self._np = np
        self._embed_texts = embed or _wordllama()
        parts = [segments(tool) for tool in tools]
        self._owners = np.array([position for position, found in enumerate(parts) for _ in found], dtype=np.int64)
        self._segments = self._embed([part for found in parts for part in found])
        self._whole = self._embed(list(texts))

    def _embed(self, texts: list[str]) -> Any:
        if not texts:
            return self._np.zeros((0, 1), dtype=self._np.float32)
        return _normalized(self._np, self._np.asarray(self._embed_texts(texts), dtype=self._np.float32))

    def scores(self, request: str) -> list[float]:
        """Each tool's score for `request` (higher: nearer)."""
        np = self._np
        if not len(self._whole):
            return []
        query = self._embed([request])[0]
        best = np.full(len(self._whole), -1.0, dtype=np.float32)
        np.maximum.at(best, self._owners, self._segments @ query)
        return (best + WHOLE_WEIGHT * (self._whole @ query)).tolist()


def _normalized(np: Any, vectors: Any) -> Any:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def _order(scores: Sequence[float], *, positive: bool) -> list[int]:
    """Positions by descending score, ties by position; with `positive`, only positions scoring above 0."""
    ranked = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [i for i in ranked if scores[i] > 0] if positive else ranked


def _installed(name: str) -> bool:
    return model_available() if name == "minilm" else embedding_available()


def _effective(method: str, embeddings: Sequence[str]) -> str:
    if not embeddings:
        return "bm25"
    return embeddings[0] if method in ("minilm", "wordllama") else method


def planned(method: str) -> tuple[str, tuple[str, ...]]:
    """How `Ranker` ranks for `method` with what is installed (unless a model fails to load): the method
    that ranks and the embeddings it fuses."""
    if method not in METHODS:
        raise ValueError(f"unknown ranking {method!r}: one of {', '.join(METHODS)}")
    wanted = [name for name in _EMBEDDINGS[method] if _installed(name)]
    if method == "minilm" and not wanted and embedding_available():
        wanted = ["wordllama"]
    return _effective(method, wanted), tuple(wanted)


class Ranker:
    """The tools of one catalog revision, ready to be ranked for requests.

    `method` is one of `METHODS`; what it asks for that is not installed is left out, and `method` becomes
    what ranks ("wordllama" for a "minilm" without the sentence model; "bm25" with no embedding at all).
    `embeddings` names the embeddings that rank. `lexicon`: read requests with the tools' words for everyday
    words added (lexicon.py); the sentence model reads the request as it was written (it reads sentences:
    added words only blur them).
    """

    def __init__(self, tools: Sequence[Mapping[str, Any]], method: str = "hybrid", *, lexicon: bool = True) -> None:
        wanted = list(planned(method)[1])
        self._lexicon = lexicon
        texts = [tool_text(tool) for tool in tools]
        self._bm25 = BM25([words(text) for text in texts])
        self._embeddings: dict[str, Embedding] = {}
        for name in wanted:
            try:
                embed = _EMBEDDERS[name]()
            except Exception:  # a model file that does not load: the others rank
                logger.warning("tool search: the %s embedding did not load; it is left out", name, exc_info=True)
                if method == "minilm" and embedding_available():
                    wanted.append("wordllama")  # as when the sentence model is not installed
                continue
            self._embeddings[name] = Embedding(tools, texts, embed)
        self.embeddings = tuple(self._embeddings)
        self.method = _effective(method, self.embeddings)

    def rank(self, request: str) -> list[int]:
        """The tools' positions, best match for `request` first (BM25 alone leaves out tools that share no word
        with it). The request is read with the tools' words for its everyday words (lexicon.py)."""
        expanded = expand(request) if self._lexicon else request
        orders: list[tuple[float, list[int]]] = []
        if self.method != "embedding":
            orders.append((1.0, _order(self._bm25.scores(words(expanded)), positive=True)))
        for name, embedding in self._embeddings.items():
            text = request if name == "minilm" else expanded
            orders.append((_WEIGHTS[name], _order(embedding.scores(text), positive=False)))
        if len(orders) == 1:
            return orders[0][1]
        fused: dict[int, float] = {}
        for weight, order in orders:
            for rank, position in enumerate(order):
                fused[position] = fused.get(position, 0.0) + weight / (RRF_K + rank + 1)
        return sorted(fused, key=lambda position: (-fused[position], position))

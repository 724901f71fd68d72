"""Embedders: the offline default model, feature hashing, the per-process registry."""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.stores import embedding
from context_assembly.stores.embedding import (
    HASHING,
    WORDLLAMA,
    EmbedderUnavailableError,
    HashingEmbedder,
    default_embedder_name,
    get_embedder,
)

HAS_WORDLLAMA = importlib.util.find_spec("wordllama") is not None
needs_model = pytest.mark.skipif(not HAS_WORDLLAMA, reason="the wordllama package is not installed")


def in_a_new_process(code: str, env: dict[str, str] | None = None) -> str:
    """What `code` prints, run by a new interpreter (what it imports is its own)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_hashing_shapes_and_norms() -> None:
    e = HashingEmbedder()
    v = e.embed(["login timeout error", "", "!!!", "Login TIMEOUT error"])
    assert v.shape == (4, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[[0, 3]], axis=1), 1.0, atol=1e-5)
    assert not v[1].any() and not v[2].any()  # no word: a zero vector, not NaN
    assert np.allclose(v[0], v[3])  # case-insensitive
    assert e.embed([]).shape == (0, 256)


def test_hashing_shares_words_not_meanings() -> None:
    v = HashingEmbedder().embed(["the login request timed out", "login request failed", "banana bread recipe"])
    assert cosine(v[0], v[1]) > 0.3 > abs(cosine(v[0], v[2]))


def test_hashing_is_deterministic_across_processes() -> None:
    texts = ["alpha beta gamma", "naïve café au lait", "x y z"]
    here = HashingEmbedder().embed(texts)
    code = ("import sys, json; from context_assembly.stores.embedding import HashingEmbedder; "
            f"print(json.dumps(HashingEmbedder().embed({texts!r}).tolist()))")
    out = in_a_new_process(code, {"PYTHONHASHSEED": "12345", "PATH": ""})
    assert np.allclose(here, np.array(json.loads(out), dtype=np.float32))


def test_registry_caches_and_rejects_unknown_names() -> None:
    assert get_embedder(HASHING) is get_embedder(HASHING)
    with pytest.raises(EmbedderUnavailableError, match="unknown embedding model"):
        get_embedder("no-such-model")


def test_default_is_the_real_model_when_installed() -> None:
    assert default_embedder_name() == (WORDLLAMA if HAS_WORDLLAMA else HASHING)


@needs_model
def test_real_model_semantic_sanity() -> None:
    e = get_embedder(WORDLLAMA)
    assert e.dimension == 256
    login, auth, banana = e.embed(["login timeout error", "authentication request timed out", "banana bread recipe"])
    assert cosine(login, auth) > cosine(login, banana) + 0.15
    db, postgres, cake = e.embed(["database connection pool exhausted", "too many open connections to postgres",
                                  "how to bake a chocolate cake"])
    assert cosine(db, postgres) > cosine(db, cake) + 0.15
    v = e.embed(["some text", ""])
    assert np.isclose(np.linalg.norm(v[0]), 1.0, atol=1e-5) and not np.isnan(v).any()


@needs_model
def test_real_model_loads_with_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    fresh = embedding.WordLlamaEmbedder()  # not the cached one: really load the files again
    assert fresh.embed(["offline"]).shape == (1, 256)


@needs_model
def test_loading_the_model_leaves_logging_alone() -> None:
    code = ("import logging; from context_assembly.stores.embedding import get_embedder, WORDLLAMA; "
            "get_embedder(WORDLLAMA).embed(['x']); root = logging.getLogger(); "
            "print(len(root.handlers), root.level)")
    assert in_a_new_process(code).split() == ["0", str(logging.WARNING)]


@functools.cache
def wordllama_itself() -> Any:
    """The model as the `wordllama` package loads and runs it."""
    import wordllama
    from wordllama import WordLlama

    return WordLlama.load(config="l2_supercat", dim=256, cache_dir=Path(wordllama.__file__).parent,
                          disable_download=True)


@needs_model
@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=150))
def test_real_model_embeds_as_wordllama_does_bit_for_bit(texts: list[str]) -> None:
    """The model is run here (not through the package, whose import costs ~120 ms): every vector
    equals wordllama's own, pooled per batch of 64 as it pools them, then made unit length."""
    expected = wordllama_itself().embed(texts, norm=False, return_np=True, batch_size=64)
    assert np.array_equal(get_embedder(WORDLLAMA).embed(texts), embedding.normalise_rows(expected))


@needs_model
def test_real_model_loads_without_importing_its_package() -> None:
    code = ("import sys; from context_assembly.stores.embedding import get_embedder, WORDLLAMA; "
            "get_embedder(WORDLLAMA).embed(['x']); "
            "print(sorted(m for m in ('wordllama', 'pydantic', 'requests') if m in sys.modules))")
    assert in_a_new_process(code).strip() == "[]"


@needs_model
@pytest.mark.parametrize("damage", ["weights missing", "weights truncated", "tokenizer garbage"])
def test_a_damaged_model_install_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    """A `wordllama` folder whose files are missing or damaged: EmbedderUnavailableError naming the
    folder (a collection's search then says so), never a crash of the library's own."""
    import wordllama

    source = Path(wordllama.__file__).parent
    package = tmp_path / "wordllama"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the package must not be imported')\n")
    tokenizer_file, weights_file = (package / name for name in embedding.WORDLLAMA_FILES)
    for name in embedding.WORDLLAMA_FILES:
        (package / name).parent.mkdir(exist_ok=True)
        (package / name).write_bytes((source / name).read_bytes())
    if damage == "weights missing":
        weights_file.unlink()
    elif damage == "weights truncated":
        weights_file.write_bytes(weights_file.read_bytes()[:5000])
    else:
        tokenizer_file.write_text("{not json")
    code = ("from context_assembly.stores.embedding import WordLlamaEmbedder, EmbedderUnavailableError\n"
            "try:\n    WordLlamaEmbedder()\nexcept EmbedderUnavailableError as exc:\n    print('refused:', exc)\n")
    out = in_a_new_process(code, {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert out.startswith(f"refused: cannot load the bundled WordLlama model from {package}"), out

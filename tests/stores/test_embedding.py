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
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_assembly.stores import embedding, model_files
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


# --- the model's float32 vectors, one file per environment (stores/model_files.py) ----------------

def copied_vectors() -> np.ndarray:
    """The vectors as the library reads them, a float32 copy."""
    from safetensors import safe_open

    with safe_open(str(weights_path()), framework="np", device="cpu") as weights:
        return np.asarray(weights.get_tensor("embedding.weight").astype(np.float32))


def weights_path() -> Path:
    import wordllama

    return Path(wordllama.__file__).parent / embedding.WORDLLAMA_FILES[1]


@needs_model
def test_the_vectors_are_one_float32_file_every_process_maps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(model_files.ENV, str(tmp_path / "models"))
    first = embedding.WordLlamaEmbedder()
    [file] = (tmp_path / "models").glob(f"{WORDLLAMA}-*.f32")
    assert first._vectors.dtype == np.float32 and not first._vectors.flags.writeable
    assert np.array_equal(first._vectors, copied_vectors())  # bit for bit the library's rows
    code = ("from pathlib import Path; from context_assembly.stores import embedding; "
            "e = embedding.WordLlamaEmbedder(); maps = Path('/proc/self/maps'); "
            "print(maps.read_text() if maps.exists() else '')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, model_files.ENV: str(tmp_path / "models")}).stdout
    if sys.platform.startswith("linux"):
        assert str(file) in out  # another process maps the same file
    assert list((tmp_path / "models").glob(f"{WORDLLAMA}-*.f32")) == [file] and file.stat().st_size == 32000 * 256 * 4


@needs_model
@pytest.mark.parametrize("damage", ["truncated", "zeros", "one row"])
def test_a_damaged_vectors_file_is_written_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                damage: str) -> None:
    monkeypatch.setenv(model_files.ENV, str(tmp_path))
    embedding.WordLlamaEmbedder()
    [file] = tmp_path.glob(f"{WORDLLAMA}-*.f32")
    data = file.read_bytes()
    file.unlink()  # (a new file: the one mapped above is never changed in place)
    row = 22_172 * 256 * 4  # a token of "hello": one row wrong, anywhere, is found
    damaged = {"truncated": data[:1001], "zeros": bytes(len(data)),
               "one row": data[:row] + bytes(1024) + data[row + 1024:]}[damage]
    file.write_bytes(damaged)
    again = embedding.WordLlamaEmbedder()
    assert np.array_equal(again._vectors, copied_vectors()) and file.read_bytes() == data


@needs_model
def test_without_a_usable_folder_each_process_keeps_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(model_files.ENV, "off")
    off = embedding.WordLlamaEmbedder()
    assert off._vectors.flags.owndata and np.array_equal(off._vectors, copied_vectors())
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(model_files.ENV, str(blocked))
    caplog.set_level("WARNING")
    kept = embedding.WordLlamaEmbedder()
    assert kept._vectors.flags.owndata and np.array_equal(kept._vectors, copied_vectors())
    assert "keeps a copy of its own" in caplog.text


@needs_model
def test_a_reinstalled_wheel_gets_a_new_file_and_the_old_one_goes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(model_files.ENV, str(tmp_path))
    embedding.WordLlamaEmbedder()
    [file] = tmp_path.glob(f"{WORDLLAMA}-*.f32")
    where = file.name.rsplit("-", 1)[0]
    stale = tmp_path / f"{where}-0123456789ab.f32"  # an earlier install of the wheel in this environment
    other = tmp_path / f"{WORDLLAMA}-ba9876543210-0123456789ab.f32"  # another environment's
    for old in (stale, other):
        old.write_bytes(b"\0" * 16)
    file.unlink()
    embedding.WordLlamaEmbedder()
    assert not stale.exists() and other.exists() and file.exists()


def safetensors_file(path: Path, tensors: dict[str, np.ndarray]) -> Path:
    from safetensors.numpy import save_file

    save_file(tensors, str(path))
    return path


def test_a_float16_matrix_is_mapped_where_the_file_holds_it(tmp_path: Path) -> None:
    matrix = np.random.default_rng(3).standard_normal((50, 8)).astype(np.float16)
    path = safetensors_file(tmp_path / "w.safetensors", {"other": np.zeros(3, dtype=np.float32), "m": matrix})
    mapped = model_files.float16_tensor(path, "m")
    assert mapped.dtype == np.float16 and np.array_equal(mapped, matrix) and not mapped.flags.writeable


@pytest.mark.parametrize("case", ["float32", "a vector", "missing", "truncated", "not safetensors",
                                  "negative offset", "boolean shape"])
def test_a_tensor_stored_otherwise_is_refused_with_value_error(tmp_path: Path, case: str) -> None:
    path = tmp_path / "w.safetensors"
    if case == "not safetensors":
        path.write_bytes(b"\xff" * 64)
    elif case in ("negative offset", "boolean shape"):
        entry = {"dtype": "F16", "shape": [2, 4], "data_offsets": [-16, 0]} if case == "negative offset" else \
            {"dtype": "F16", "shape": [True, 16], "data_offsets": [0, 32]}
        header = json.dumps({"m": entry}).encode()
        path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 64)
    else:
        tensor = {"float32": np.ones((4, 4), dtype=np.float32), "a vector": np.ones(16, dtype=np.float16),
                  "missing": np.ones((4, 4), dtype=np.float16), "truncated": np.ones((40, 40), dtype=np.float16)}[case]
        safetensors_file(path, {"m" if case != "missing" else "n": tensor})
        if case == "truncated":
            path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError):
        model_files.float16_tensor(path, "m")


@needs_model
def test_writing_a_file_removes_leftovers_and_files_no_process_used_for_a_month(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(model_files.ENV, str(tmp_path))
    month_ago = time.time() - 31 * 86_400
    unused = tmp_path / f"{WORDLLAMA}-aaaaaaaaaaaa-0123456789ab.f32"  # an environment removed since
    used = tmp_path / f"{WORDLLAMA}-bbbbbbbbbbbb-0123456789ab.f32"  # one loaded lately
    killed = tmp_path / f".{WORDLLAMA}-x.f32.abc.tmp"  # a writer killed an hour ago
    writing = tmp_path / f".{WORDLLAMA}-y.f32.def.tmp"  # a writer at work
    foreign = tmp_path / ".editor-swap.tmp"  # another program's, in a folder the user chose to share
    for path in (unused, used, killed, writing, foreign):
        path.write_bytes(b"\0" * 16)
    for old in (killed, foreign):
        os.utime(old, (time.time() - 7200, time.time() - 7200))
    os.utime(unused, (month_ago, month_ago))
    embedding.WordLlamaEmbedder()
    assert not unused.exists() and not killed.exists()
    assert used.exists() and writing.exists() and foreign.exists()
    [file] = [p for p in tmp_path.glob(f"{WORDLLAMA}-*.f32") if p != used]
    os.utime(file, (month_ago, month_ago))
    embedding.WordLlamaEmbedder()  # loading it marks it used
    assert file.stat().st_mtime > month_ago + 86_400

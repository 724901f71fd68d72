"""Hostile references (SPEC §5.1, §10): nothing outside the workspace is ever read or written.

Every scheme that touches paths (file://, markdown://) refuses the corpus with InvalidParamsError;
the stores whose keys are opaque either refuse a key (NUL) or keep it inside the database.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from context_assembly.errors import InvalidParamsError
from context_assembly.stores.confine import check_name, check_relative_path, resolve_inside
from context_assembly.stores.memory import MemoryRouter

SECRET = "CANARY-SECRET-do-not-read"

HOSTILE = [
    "../canary.txt",
    "../../canary.txt",
    "a/../../canary.txt",
    "./../canary.txt",
    "..%2fcanary.txt",
    "..%2Fcanary.txt",
    "%2e%2e/canary.txt",
    "%2e%2e%2fcanary.txt",
    "%2E%2E%2F%2E%2E%2Fcanary.txt",
    "..%5ccanary.txt",
    "%252e%252e/canary.txt",
    "%252e%252e%252fcanary.txt",
    "..%252fcanary.txt",
    "%25252e%25252e%25252fcanary.txt",
    "....//canary.txt",
    "...",
    "..",
    ".",
    "/etc/passwd",
    "//etc/passwd",
    "%2fetc%2fpasswd",
    "C:\\x",
    "C:/x",
    "c:x",
    "..\\..\\canary.txt",
    "a\\..\\..\\canary.txt",
    "a\x00b",
    "%00",
    "a%00.md",
    "a//b",
    "",
]

# Symbolic links created inside the workspace that lead out of it.
SYMLINKED = ["link/canary.txt", "link", "memory-escape/x"]


def _snapshot(root: Path, skip: Path) -> dict[str, str]:
    """Every file under `root` but outside `skip`, with a hash of its bytes."""
    found = {}
    for directory, dirs, files in os.walk(root):
        if Path(directory) == skip:
            dirs[:] = []
            continue
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[MemoryRouter, Path]]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text(SECRET)
    (outside / "canary.md").write_text(SECRET)
    (tmp_path / "canary.txt").write_text(SECRET)
    workspace = tmp_path / "ws"
    memory_dir = workspace / ".codebolt" / "memory"
    memory_dir.mkdir(parents=True)
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    (workspace / "passwd").symlink_to("/etc/passwd")
    (memory_dir / "evil.md").symlink_to(outside / "canary.md")
    (memory_dir / "memory-escape").symlink_to(outside, target_is_directory=True)
    (memory_dir / "fine.md").write_text("inside")
    before = _snapshot(tmp_path, workspace)
    service = MemoryRouter(workspace)
    yield service, workspace
    service.close()
    assert _snapshot(tmp_path, workspace) == before, "a file outside the workspace appeared or changed"
    assert (outside / "canary.txt").read_text() == SECRET


def _refused(call: Callable[[], Any]) -> None:
    try:
        result = call()
    except InvalidParamsError as exc:
        assert exc.errors and exc.errors[0]["message"]
        return
    raise AssertionError(f"not refused: {result!r}")


def _never_leaks(result: Any) -> None:
    assert SECRET not in repr(result)
    assert "root:" not in repr(result)


@pytest.mark.parametrize("reference", HOSTILE + ["passwd", "link/canary.txt", "link"])
def test_file_scheme_refuses(sandbox: tuple[MemoryRouter, Path], reference: str) -> None:
    memory, _ = sandbox
    uri = "file://" + reference
    _refused(lambda: memory.read(uri))
    _refused(lambda: memory.write(uri, "pwned"))
    _refused(lambda: memory.delete(uri))
    _refused(lambda: memory.files.read(reference))


@pytest.mark.parametrize("reference", HOSTILE + ["evil", "evil.md", "memory-escape/x", "memory-escape/canary"])
def test_markdown_scheme_refuses(sandbox: tuple[MemoryRouter, Path], reference: str) -> None:
    memory, _ = sandbox
    uri = "markdown://" + reference
    _refused(lambda: memory.read(uri))
    _refused(lambda: memory.write(uri, "pwned"))
    _refused(lambda: memory.delete(uri))
    name = reference.removesuffix(".md")  # the store's names are exact; the URI dropped one `.md`
    _refused(lambda: memory.notes.read(name))
    _refused(lambda: memory.notes.write(name, "pwned"))
    _refused(lambda: memory.notes.delete(name))


@pytest.mark.parametrize("reference", [r for r in HOSTILE if r not in ("", ".")] + SYMLINKED)
def test_list_prefixes_never_leave_the_workspace(sandbox: tuple[MemoryRouter, Path], reference: str) -> None:
    memory, _ = sandbox
    for scheme in ("file", "markdown"):
        try:
            result = memory.list(f"{scheme}://{reference}")
        except InvalidParamsError:
            continue
        _never_leaks(result)
        assert all("canary" not in item["uri"] for item in result["items"])


def test_listing_hides_links_out_of_the_workspace(sandbox: tuple[MemoryRouter, Path]) -> None:
    memory, _ = sandbox
    assert [i["uri"] for i in memory.list("markdown://")["items"]] == ["markdown://fine"]
    root = [i["uri"] for i in memory.list("file://")["items"]]
    assert "file://link/" not in root and "file://passwd" not in root and "file://.codebolt/" in root


@pytest.mark.parametrize("reference", HOSTILE)
def test_opaque_keys_stay_in_the_database(sandbox: tuple[MemoryRouter, Path], reference: str) -> None:
    memory, _ = sandbox
    key = quote(reference, safe="")
    cases = {
        "kv": (f"kv://{key}", {"v": reference}, {"v": reference}),
        "json": (f"json://{key}", [reference], [reference]),
        "working": (f"working://t/{key}", reference, reference),
        "blob": (f"blob://b/{key}", "cHduZWQ=", "cHduZWQ="),
        "episodic": (f"episodic://{key}", {"role": "user", "content": reference}, None),
        "log": (f"log://{key}", {"event_type": "e", "payload": {"r": reference}}, None),
    }
    for uri, value, expected in cases.values():
        try:
            memory.write(uri, value)
        except InvalidParamsError:
            assert "\x00" in reference.replace("%00", "\x00") or reference == ""
            continue
        result = memory.read(uri)
        _never_leaks(result)
        assert result["exists"] is True
        if expected is not None:
            assert result["value"] == expected
        else:
            assert reference in repr(result["value"]) or "\\" in reference
    # Unencoded: either refused as a malformed URI or stored under odd but harmless key names.
    try:
        memory.write("kv://" + reference, 1)
    except InvalidParamsError:
        return
    assert memory.read("kv://" + reference)["value"] == 1


def test_confinement_functions(tmp_path: Path) -> None:
    assert check_relative_path("a/./b.md") == "a/b.md"
    assert check_relative_path("100%.md") == "100%.md"  # a lone % is no encoding
    assert check_name("note") == "note"
    _refused(lambda: check_name("a/b"))
    _refused(lambda: check_relative_path("%2525252e%2525252e/x"))  # too deep to be innocent
    assert resolve_inside(tmp_path, "a/b") == Path(os.path.realpath(tmp_path)) / "a" / "b"
    (tmp_path / "inner").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "inner", target_is_directory=True)
    assert resolve_inside(tmp_path, "alias/x") == Path(os.path.realpath(tmp_path)) / "inner" / "x"
    with pytest.raises(InvalidParamsError) as caught:
        check_relative_path("../x", what="template path", pointer="/steps/0/path")
    assert caught.value.errors == [{"path": "/steps/0/path", "message": caught.value.message}]
    assert "template path" in caught.value.message

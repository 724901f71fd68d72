"""A workspace reached through symlinks (`workspace/places.py`): a path the client sends maps to its
relpath in whichever spelling it took, the server names files in the client's spelling, and nothing
outside the workspace (a sibling folder, a `..` path, a symlink out of it) maps or is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_assembly.editor.documents import build_document, document_from_source
from context_assembly.methods import Session
from context_assembly.workspace.loader import load_workspace
from context_assembly.workspace.places import Places

MEMORY = ".codebolt/PersistentMemory/m.json"
MEMORY_TEXT = json.dumps({"id": "m", "retrieval": {"pipeline": []}, "contribution": {"section": "knowledge"}})


@pytest.fixture
def linked_root(tmp_path: Path) -> tuple[Path, Path]:
    """(`link`, `real`): the client names `link`, a symlink to the project folder `real`."""
    real = tmp_path / "real"
    (real / ".codebolt" / "PersistentMemory").mkdir(parents=True)
    (real / MEMORY).write_text(MEMORY_TEXT)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.json").write_text("{}")
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    return link, real


@pytest.fixture
def shared_codebolt(tmp_path: Path) -> tuple[Path, Path]:
    """(`proj`, `shared/cb`): the project's `.codebolt` is a symlink to a folder elsewhere."""
    shared = tmp_path / "shared" / "cb"
    (shared / "PersistentMemory").mkdir(parents=True)
    (shared / "PersistentMemory" / "m.json").write_text(MEMORY_TEXT)
    (tmp_path / "shared" / "x.json").write_text("{}")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "s.json").write_text('{"secret": true}')
    (shared / "escape").symlink_to(tmp_path / "secret", target_is_directory=True)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".codebolt").symlink_to(shared, target_is_directory=True)
    return proj, shared


def test_a_linked_root_is_kept_as_the_client_names_it(linked_root: tuple[Path, Path]) -> None:
    link, real = linked_root
    places = Places.of(link)
    assert places.client_root == link and places.root == real.resolve()
    for spelling in (link, real):
        assert places.relpath(spelling / MEMORY) == MEMORY
    assert places.uri(MEMORY) == (link / MEMORY).as_uri()
    assert Places.of(places) is places


def test_a_shared_codebolt_maps_through_its_symlink(shared_codebolt: tuple[Path, Path]) -> None:
    proj, shared = shared_codebolt
    places = Places.of(proj)
    assert places.relpath(proj / MEMORY) == MEMORY
    assert places.relpath(shared / "PersistentMemory" / "m.json") == MEMORY  # the resolved spelling
    assert places.uri(MEMORY) == (proj / MEMORY).as_uri()


def test_files_outside_stay_outside(linked_root: tuple[Path, Path], shared_codebolt: tuple[Path, Path]) -> None:
    link, real = linked_root
    assert Places.of(link).relpath(link.parent / "other" / "x.json") is None
    proj, shared = shared_codebolt
    assert Places.of(proj).relpath(shared.parent / "x.json") is None  # beside the shared folder


def test_a_dotdot_path_does_not_escape(linked_root: tuple[Path, Path], shared_codebolt: tuple[Path, Path]) -> None:
    link, _real = linked_root
    assert Places.of(link).relpath(link / ".." / "other" / "x.json") is None
    assert Places.of(link).relpath(link / ".codebolt" / ".." / ".." / "other" / "x.json") is None
    proj, _shared = shared_codebolt
    # lexically `proj/x.json`; the file system reads `shared/x.json`, outside
    assert Places.of(proj).relpath(proj / ".codebolt" / ".." / "x.json") is None
    assert Places.of(proj).relpath(proj / ".codebolt" / "PersistentMemory" / ".." / "PersistentMemory" / "m.json") \
        == MEMORY


def test_only_workspace_files_are_readable(shared_codebolt: tuple[Path, Path]) -> None:
    proj, shared = shared_codebolt
    places = Places.of(proj)
    assert places.readable(proj / MEMORY) == (shared / "PersistentMemory" / "m.json").resolve()
    assert places.readable(proj / ".codebolt" / "escape" / "s.json") is None  # a symlink out of it
    assert places.readable(shared.parent / "x.json") is None
    assert places.readable(proj / ".codebolt" / ".." / "x.json") is None


def test_documents_under_a_shared_codebolt_are_workspace_files(shared_codebolt: tuple[Path, Path]) -> None:
    proj, _shared = shared_codebolt
    places = Places.of(proj)
    document = build_document((proj / MEMORY).as_uri(), MEMORY_TEXT, 1, places)
    assert document is not None and not document.outside
    assert (document.relpath, document.kind) == (MEMORY, "persistent-memory")
    source = load_workspace(proj).files[MEMORY]
    assert document_from_source(source, places).uri == (proj / MEMORY).as_uri()


def test_documents_of_a_linked_root_are_named_in_its_spelling(linked_root: tuple[Path, Path]) -> None:
    link, real = linked_root
    places = Places.of(link)
    for spelling in (link, real):
        document = build_document((spelling / MEMORY).as_uri(), MEMORY_TEXT, 1, places)
        assert document is not None and not document.outside and document.relpath == MEMORY
    source = load_workspace(link).files[MEMORY]
    assert document_from_source(source, places).uri == (link / MEMORY).as_uri()


def test_the_session_reads_a_shared_codebolt_and_nothing_outside(shared_codebolt: tuple[Path, Path]) -> None:
    proj, shared = shared_codebolt
    session = Session(proj)
    try:
        assert session.document_text((proj / MEMORY).as_uri()) == MEMORY_TEXT
        assert session.document_text((proj / ".codebolt" / "escape" / "s.json").as_uri()) is None
        assert session.document_text((shared.parent / "x.json").as_uri()) is None
        assert session.document_text((proj / ".codebolt" / ".." / "x.json").as_uri()) is None
    finally:
        session.close()


def test_another_projects_codebolt_below_the_root_is_not_this_workspace(tmp_path: Path) -> None:
    """A nested project, or another one linked in below the root: its `.codebolt/` files are its own
    project's, whichever spelling reaches them (they were laid over this workspace as its files)."""
    root = tmp_path / "ws"
    (root / ".codebolt").mkdir(parents=True)
    (root / "nested" / ".codebolt").mkdir(parents=True)
    other = tmp_path / "other"
    (other / ".codebolt").mkdir(parents=True)
    (root / "vendor").mkdir()
    (root / "vendor" / "other").symlink_to(other, target_is_directory=True)
    places = Places.of(root)
    assert places.relpath(root / ".codebolt" / "x.json") == ".codebolt/x.json"
    assert places.relpath(root / "nested" / ".codebolt" / "x.json") is None
    assert places.relpath(root / "vendor" / "other" / ".codebolt" / "x.json") is None
    assert places.relpath(other / ".codebolt" / "x.json") is None
    assert places.relpath(root / "docs" / "x.json") == "docs/x.json"  # a `$schema` document of the project


@pytest.mark.parametrize("target", ["parent", "filesystem-root"])
def test_a_codebolt_linked_to_a_folder_holding_the_project_opens_nothing_more(tmp_path: Path, target: str) -> None:
    """`.codebolt` linked to the project's parent (or `/`): everything below the link's target would
    have counted as a workspace file, readable by URI."""
    project = tmp_path / "home" / "proj"
    project.mkdir(parents=True)
    (tmp_path / "home" / "secret.txt").write_text("key")
    (project / ".codebolt").symlink_to(tmp_path / "home" if target == "parent" else Path("/"), target_is_directory=True)
    places = Places.of(project)
    assert places.readable(tmp_path / "home" / "secret.txt") is None
    assert places.readable(Path("/etc/hostname")) is None
    assert places.relpath(tmp_path / "home" / "secret.txt") is None
    assert places.readable(project / "README.md") == (project / "README.md").resolve()  # the project's own


def test_a_codebolt_linked_to_a_folder_of_its_own_is_read(shared_codebolt: tuple[Path, Path]) -> None:
    project, shared = shared_codebolt
    places = Places.of(project)
    assert places.readable(shared / "PersistentMemory" / "m.json") is not None
    assert places.readable(shared.parent / "x.json") is None  # beside the linked folder: not ours


def test_an_older_version_never_replaces_a_newer_open_text(tmp_path: Path) -> None:
    """A worker done late (a test run) hands back the snapshot it started from: the store keeps the
    newer text the editor sent meanwhile."""
    from context_assembly.editor.documents import DocumentStore

    (tmp_path / ".codebolt" / "PersistentMemory").mkdir(parents=True)
    uri = (tmp_path / MEMORY).as_uri()
    store = DocumentStore(tmp_path)
    store.update(uri, MEMORY_TEXT, 1)
    newer = store.update(uri, MEMORY_TEXT.replace('"m"', '"m2"'), 2)
    older = store.update(uri, MEMORY_TEXT, 1)
    assert older is not None and older.version == 1 and older.text == MEMORY_TEXT  # answered for its own version
    assert store.get(uri) is newer

"""Definition repositories: CRUD of `.codebolt/` files as a user and a concurrent swarm see them."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
import yaml

from context_assembly.errors import ConflictError, InvalidParamsError, NotFoundError, StorageError
from context_assembly.workspace import atomic
from context_assembly.workspace.atomic import workspace_lock
from context_assembly.workspace.layout import WorkspaceLayout
from context_assembly.workspace.repository import (
    DefinitionRepository,
    RuleEngineRepository,
    definition_repository,
    rule_engine_repository,
)

SPAWN = multiprocessing.get_context("spawn")


@pytest.fixture
def layout(tmp_path: Path) -> WorkspaceLayout:
    return WorkspaceLayout(tmp_path / "ws")


@pytest.fixture
def engines(layout: WorkspaceLayout) -> RuleEngineRepository:
    return rule_engine_repository(layout)


@pytest.fixture
def memories(layout: WorkspaceLayout) -> DefinitionRepository:
    return definition_repository(layout, "persistent-memory")


def all_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix != ".lock"}


def stored(path: Path) -> Any:
    return json.loads(path.read_text())


def error_paths(exc: InvalidParamsError) -> list[str]:
    return [problem["path"] for problem in exc.errors]


# -- layout and factories


def test_layout_paths(tmp_path: Path) -> None:
    layout = WorkspaceLayout(str(tmp_path))
    cb = tmp_path / ".codebolt"
    assert layout.codebolt == cb
    assert layout.rule_engines_dir == cb / "context-rule-engines"
    assert layout.context_rules_dir == cb / "ContextRuleEngine"
    assert layout.persistent_memory_dir == cb / "PersistentMemory"
    assert layout.ingestion_dir == cb / "MemoryIngestion"
    assert layout.db_path == cb / "db" / "project.db"
    assert layout.memory_dir == cb / "memory"
    assert layout.snapshots_dir == cb / "memory" / "context"
    assert layout.vectordb_dir == cb / "vectordb"
    assert layout.kuzu_dir == cb / "knowledgegraph" / "kuzu"
    assert layout.graph_views_dir == cb / "knowledgegraph" / "views"
    assert layout.settings_path == cb / "context-assembly.json"
    assert layout.locks_dir == cb / ".locks"


def test_factories_write_where_the_spec_says(layout: WorkspaceLayout) -> None:
    assert rule_engine_repository(layout).create({})["id"].startswith("engine-")
    assert definition_repository(layout, "persistent-memory").create({})["id"].startswith("memory-")
    assert definition_repository(layout, "ingestion-pipeline").create({})["id"].startswith("ingestion-")
    assert len(list(layout.rule_engines_dir.glob("engine-*.json"))) == 1
    assert len(list(layout.persistent_memory_dir.glob("memory-*.json"))) == 1
    assert len(list(layout.ingestion_dir.glob("ingestion-*.json"))) == 1


# -- create / get / list / update / delete


def test_create_writes_the_file_as_the_formatter_lays_it_out(memories: DefinitionRepository) -> None:
    doc = {"zeta": 1, "status": "active", "id": "arch", "alpha": {"b": 2, "a": 1}, "label": "Architecture"}
    assert memories.create(doc) == doc
    text = (memories.directory / "arch.json").read_text()
    # the schema's keys in its order, then the others as given; scalar-only objects on one line
    assert text == '{\n  "id": "arch",\n  "label": "Architecture",\n  "status": "active",\n  "zeta": 1,\n' \
                   '  "alpha": { "b": 2, "a": 1 }\n}\n'


def test_generated_id_goes_first_or_after_schema(engines: RuleEngineRepository) -> None:
    created = engines.create({"$schema": "s", "name": "Planning phase rules"})
    assert created == {"$schema": "s", "id": "planning-phase-rules", "name": "Planning phase rules"}
    assert list(created) == ["$schema", "id", "name"]
    assert list(engines.create({"label": "x"})) == ["id", "label"]


def test_get_returns_what_was_stored(memories: DefinitionRepository) -> None:
    memories.create({"id": "arch", "label": "A"})
    assert memories.get("arch") == {"id": "arch", "label": "A"}


def test_list_is_sorted_by_id_and_empty_without_directory(memories: DefinitionRepository) -> None:
    assert memories.list() == []
    for def_id in ["b", "c", "a"]:
        memories.create({"id": def_id})
    assert [d["id"] for d in memories.list()] == ["a", "b", "c"]


def test_list_skips_broken_and_foreign_files(memories: DefinitionRepository) -> None:
    memories.create({"id": "good"})
    d = memories.directory
    (d / "bad.json").write_text("{ not json")
    (d / "array.json").write_text("[1, 2]")
    (d / "empty.yaml").write_text("")
    (d / "broken.yml").write_text("a: [unclosed")
    (d / "notes.txt").write_text("{}")
    (d / ".good.json.1234.tmp").write_text("{}")
    assert [doc["id"] for doc in memories.list()] == ["good"]


def test_get_of_a_broken_file_is_a_storage_error(memories: DefinitionRepository) -> None:
    memories.directory.mkdir(parents=True)
    (memories.directory / "bad.json").write_text("{ not json")
    with pytest.raises(StorageError):
        memories.get("bad")


def test_file_name_is_the_id(memories: DefinitionRepository) -> None:
    memories.directory.mkdir(parents=True)
    (memories.directory / "no-id.json").write_text('{"label": "x"}')
    (memories.directory / "other.json").write_text('{"id": "something-else"}')
    assert memories.get("no-id") == {"id": "no-id", "label": "x"}
    assert memories.get("other") == {"id": "other"}


def test_update_merges_top_level_keys_and_keeps_unknown_ones(memories: DefinitionRepository) -> None:
    memories.create(
        {
            "id": "m",
            "label": "old",
            "x-custom": {"keep": True},
            "contribution": {"section": "k", "max_items": 5},
        }
    )
    updated = memories.update("m", {"label": "new", "contribution": {"section": "n"}, "status": "active"})
    expected = {
        "id": "m",
        "label": "new",
        "x-custom": {"keep": True},
        "contribution": {"section": "n"},  # shallow: a nested object is replaced whole
        "status": "active",
    }
    assert updated == expected
    assert memories.get("m") == expected
    assert list(stored(memories.directory / "m.json")) == ["id", "label", "status", "contribution", "x-custom"]


def test_update_accepts_its_own_id_and_refuses_another(memories: DefinitionRepository) -> None:
    memories.create({"id": "m"})
    assert memories.update("m", {"id": "m", "label": "x"})["label"] == "x"
    with pytest.raises(InvalidParamsError) as caught:
        memories.update("m", {"id": "n"})
    assert error_paths(caught.value) == ["/updates/id"]
    assert memories.get("m") == {"id": "m", "label": "x"}
    assert not (memories.directory / "n.json").exists()


def test_update_requires_an_object(memories: DefinitionRepository) -> None:
    memories.create({"id": "m"})
    with pytest.raises(InvalidParamsError) as caught:
        memories.update("m", ["label"])  # type: ignore[arg-type]
    assert error_paths(caught.value) == ["/updates"]


def test_create_requires_an_object(memories: DefinitionRepository) -> None:
    with pytest.raises(InvalidParamsError):
        memories.create("arch")  # type: ignore[arg-type]


def test_delete_removes_the_file(memories: DefinitionRepository) -> None:
    memories.create({"id": "m"})
    assert memories.delete("m") == {"id": "m", "deleted": True}
    assert not (memories.directory / "m.json").exists()
    with pytest.raises(NotFoundError):
        memories.get("m")


@pytest.mark.parametrize(
    "call",
    [
        lambda repo: repo.get("nope"),
        lambda repo: repo.update("nope", {"label": "x"}),
        lambda repo: repo.delete("nope"),
    ],
    ids=["get", "update", "delete"],
)
def test_unknown_id_is_not_found(memories: DefinitionRepository, call: Any) -> None:
    memories.create({"id": "other"})
    with pytest.raises(NotFoundError) as caught:
        call(memories)
    assert caught.value.code == -32001
    assert not (memories.directory / "nope.json").exists()


def test_created_doc_is_not_aliased_to_the_callers_dict(engines: RuleEngineRepository) -> None:
    doc: dict[str, Any] = {"name": "E", "rules": [{"name": "r"}]}
    engines.create(doc)
    assert doc == {"name": "E", "rules": [{"name": "r"}]}


# -- ids


def test_ids_generated_from_name_or_label_are_unique(memories: DefinitionRepository) -> None:
    assert memories.create({"label": "Architecture Docs!"})["id"] == "architecture-docs"
    assert memories.create({"label": "Architecture docs"})["id"] == "architecture-docs-2"
    assert memories.create({"name": "Architecture docs"})["id"] == "architecture-docs-3"
    assert memories.create({"name": "Café Ünïcode"})["id"] == "cafe-unicode"


def test_ids_without_a_usable_title_get_the_prefix(memories: DefinitionRepository) -> None:
    docs: list[dict[str, Any]] = [{}, {"label": "!!!"}, {"name": 7}, {"id": None}, {"id": ""}, {"name": "NUL"}]
    ids = {memories.create(doc)["id"] for doc in docs}
    assert len(ids) == 6
    assert all(def_id.startswith("memory-") for def_id in ids)


def test_existing_id_is_a_conflict_and_leaves_the_file(memories: DefinitionRepository) -> None:
    memories.create({"id": "m", "label": "first"})
    with pytest.raises(ConflictError) as caught:
        memories.create({"id": "m", "label": "second"})
    assert caught.value.code == -32003
    assert memories.get("m")["label"] == "first"


def test_id_stored_as_yaml_is_also_a_conflict(memories: DefinitionRepository) -> None:
    memories.directory.mkdir(parents=True)
    (memories.directory / "m.yaml").write_text("label: yaml\n")
    with pytest.raises(ConflictError):
        memories.create({"id": "m"})
    assert memories.create({"label": "m"})["id"] == "m-2"


@pytest.mark.parametrize(
    "bad_id",
    [
        "../x",
        "a/b",
        "a\\b",
        "/etc/passwd",
        "..",
        ".",
        ".hidden",
        "",
        "x\n",
        "with space",
        "x" * 129,
        "nul",
        5,
    ],
)
def test_unsafe_ids_are_refused_and_nothing_is_written(
    layout: WorkspaceLayout, memories: DefinitionRepository, bad_id: Any
) -> None:
    memories.create({"id": "ok"})
    (layout.codebolt / "x.json").write_text('{"id": "x", "secret": true}')
    before = all_files(layout.root.parent)
    calls = [
        lambda: memories.get(bad_id),
        lambda: memories.update(bad_id, {"label": "x"}),
        lambda: memories.delete(bad_id),
    ]
    if bad_id != "":  # create treats an empty id as missing and generates one
        calls.append(lambda: memories.create({"id": bad_id}))
    for call in calls:
        with pytest.raises(InvalidParamsError) as caught:
            call()
        assert error_paths(caught.value) == ["/id"]
    assert all_files(layout.root.parent) == before


# -- YAML definitions


def test_yaml_definitions_are_read_and_written_back_as_yaml(memories: DefinitionRepository) -> None:
    memories.directory.mkdir(parents=True)
    path = memories.directory / "notes.yaml"
    path.write_text("id: notes\nlabel: Notes\nretrieval:\n  pipeline:\n    - type: markdown_read\n")
    (memories.directory / "short.yml").write_text("label: Short\n")
    assert memories.get("notes")["retrieval"] == {"pipeline": [{"type": "markdown_read"}]}
    assert [d["id"] for d in memories.list()] == ["notes", "short"]

    memories.update("notes", {"status": "active", "label": "Notes 2"})
    memories.update("short", {"status": "disabled"})
    assert not (memories.directory / "notes.json").exists()
    assert not (memories.directory / "short.json").exists()
    assert list(yaml.safe_load(path.read_text())) == ["id", "label", "status", "retrieval"]  # the schema's order
    assert yaml.safe_load(path.read_text())["label"] == "Notes 2"
    assert yaml.safe_load((memories.directory / "short.yml").read_text()) == {
        "id": "short",
        "label": "Short",
        "status": "disabled",
    }
    assert memories.delete("notes") == {"id": "notes", "deleted": True}
    assert not path.exists()


# -- validate hook


def require_label(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [] if isinstance(doc.get("label"), str) else [{"path": "/label", "message": "required"}]


def test_validate_hook_rejects_and_writes_nothing(layout: WorkspaceLayout) -> None:
    repo = definition_repository(layout, "persistent-memory", validate=require_label)
    with pytest.raises(InvalidParamsError, match="invalid persistent memory") as caught:
        repo.create({"id": "m"})
    assert caught.value.errors == [{"path": "/label", "message": "required"}]
    assert not repo.directory.exists() or list(repo.directory.iterdir()) == []

    repo.create({"id": "m", "label": "ok"})
    with pytest.raises(InvalidParamsError):
        repo.update("m", {"label": None})
    assert repo.get("m") == {"id": "m", "label": "ok"}


def test_validate_hook_sees_the_merged_document(layout: WorkspaceLayout) -> None:
    seen: list[dict[str, Any]] = []

    def record(doc: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(doc)
        return []

    repo = definition_repository(layout, "persistent-memory", validate=record)
    repo.create({"id": "m", "label": "a"})
    repo.update("m", {"status": "active"})
    assert seen[-1] == {"id": "m", "label": "a", "status": "active"}


# -- atomicity


def test_failed_write_keeps_the_old_definition(memories: DefinitionRepository, monkeypatch: pytest.MonkeyPatch) -> None:
    memories.create({"id": "m", "label": "old"})
    before = (memories.directory / "m.json").read_bytes()

    def crash(src: Any, dst: Any) -> None:
        raise OSError("crash mid-write")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(StorageError) as caught:
        memories.update("m", {"label": "new"})
    assert caught.value.code == -32006
    monkeypatch.undo()
    assert (memories.directory / "m.json").read_bytes() == before
    assert sorted(p.name for p in memories.directory.iterdir()) == ["m.json"]


def test_lock_timeout_is_a_storage_error_and_writes_nothing(layout: WorkspaceLayout) -> None:
    repo = definition_repository(layout, "persistent-memory", lock_timeout=0.2)
    held, release = SPAWN.Event(), SPAWN.Event()
    holder = SPAWN.Process(target=_hold_lock, args=(str(layout.locks_dir), "PersistentMemory", held, release))
    holder.start()
    try:
        assert held.wait(30)
        with pytest.raises(StorageError):
            repo.create({"id": "m"})
    finally:
        release.set()
        holder.join(30)
    assert not (repo.directory / "m.json").exists()
    repo.create({"id": "m"})


def test_repository_calls_nest_inside_the_workspace_lock(memories: DefinitionRepository) -> None:
    with workspace_lock(memories.lock_dir, memories.directory.name, timeout=1):
        memories.create({"id": "m"})
        memories.update("m", {"label": "x"})


# -- rule engines


def test_create_generates_rule_ids(engines: RuleEngineRepository) -> None:
    engine = engines.create(
        {
            "id": "planning",
            "rules": [
                {"name": "Arch in planning!", "when": []},
                {"when": []},
                {"id": "rule-2"},
                {"name": "Arch in planning"},
            ],
        }
    )
    ids = [r["id"] for r in engine["rules"]]
    assert ids == ["arch-in-planning", "rule-3", "rule-2", "arch-in-planning-2"]
    assert list(engine["rules"][1]) == ["id", "when"]
    assert engines.get("planning") == engine


def test_create_refuses_duplicate_or_non_string_rule_ids(engines: RuleEngineRepository) -> None:
    with pytest.raises(InvalidParamsError) as caught:
        engines.create({"id": "e", "rules": [{"id": "a"}, {"id": "a"}]})
    assert error_paths(caught.value) == ["/rules/1/id"]
    with pytest.raises(InvalidParamsError) as caught:
        engines.create({"id": "e", "rules": [{"id": 3}]})
    assert error_paths(caught.value) == ["/rules/0/id"]
    assert engines.list() == []


def test_update_generates_ids_for_new_rules(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "enabled": True, "rules": [{"id": "keep"}]})
    engine = engines.update("e", {"rules": [{"id": "keep"}, {"priority": 1}]})
    assert engine == {"id": "e", "enabled": True, "rules": [{"id": "keep"}, {"id": "rule-2", "priority": 1}]}


def test_add_rule(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "rules": [{"id": "rule-1"}]})
    assert engines.add_rule("e", {"priority": 5}) == {"id": "rule-2", "priority": 5}
    assert engines.add_rule("e", {"name": "By name"})["id"] == "by-name"
    assert engines.add_rule("e", {"id": "explicit"}) == {"id": "explicit"}
    assert [r["id"] for r in engines.get("e")["rules"]] == ["rule-1", "rule-2", "by-name", "explicit"]


def test_add_rule_to_an_engine_without_rules(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e"})
    assert engines.add_rule("e", {})["id"] == "rule-1"


def test_add_rule_errors(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "rules": [{"id": "r"}]})
    with pytest.raises(ConflictError):
        engines.add_rule("e", {"id": "r", "priority": 9})
    with pytest.raises(NotFoundError):
        engines.add_rule("missing", {})
    with pytest.raises(InvalidParamsError) as caught:
        engines.add_rule("e", "rule")  # type: ignore[arg-type]
    assert error_paths(caught.value) == ["/rule"]
    with pytest.raises(InvalidParamsError) as caught:
        engines.add_rule("../e", {})
    assert error_paths(caught.value) == ["/engine_id"]
    assert engines.get("e")["rules"] == [{"id": "r"}]


def test_update_rule_merges(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "rules": [{"id": "r", "priority": 1, "x-note": "keep", "then": {"a": 1}}]})
    updated = engines.update_rule("e", "r", {"priority": 7, "then": {"b": 2}, "id": "r"})
    assert updated == {"id": "r", "priority": 7, "x-note": "keep", "then": {"b": 2}}
    assert engines.get("e")["rules"] == [updated]


def test_update_rule_errors(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "rules": [{"id": "r"}]})
    with pytest.raises(NotFoundError):
        engines.update_rule("missing", "r", {})
    with pytest.raises(NotFoundError):
        engines.update_rule("e", "nope", {})
    with pytest.raises(InvalidParamsError) as caught:
        engines.update_rule("e", "r", {"id": "other"})
    assert error_paths(caught.value) == ["/updates/id"]
    assert engines.get("e")["rules"] == [{"id": "r"}]


def test_delete_rule(engines: RuleEngineRepository) -> None:
    engines.create({"id": "e", "rules": [{"id": "a"}, {"id": "b"}]})
    assert engines.delete_rule("e", "a") == {"engine_id": "e", "rule_id": "a", "deleted": True}
    assert engines.get("e")["rules"] == [{"id": "b"}]
    with pytest.raises(NotFoundError):
        engines.delete_rule("e", "a")
    with pytest.raises(NotFoundError):
        engines.delete_rule("missing", "b")


def test_rule_edits_are_validated(layout: WorkspaceLayout) -> None:
    def no_empty_rules(engine: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"path": f"/rules/{i}/then", "message": "required"}
            for i, rule in enumerate(engine.get("rules", []))
            if "then" not in rule
        ]

    repo = rule_engine_repository(layout, validate=no_empty_rules)
    repo.create({"id": "e", "rules": [{"id": "r", "then": {}}]})
    with pytest.raises(InvalidParamsError) as caught:
        repo.add_rule("e", {"id": "x"})
    assert caught.value.errors == [{"path": "/rules/1/then", "message": "required"}]
    assert repo.get("e")["rules"] == [{"id": "r", "then": {}}]


# -- two processes at once


def _hold_lock(lock_dir: str, name: str, held: Any, release: Any) -> None:
    with workspace_lock(Path(lock_dir), name):
        held.set()
        release.wait(30)


def _add_rules(root: str, worker: int, count: int, go: Any) -> None:
    repo = rule_engine_repository(WorkspaceLayout(root))
    go.wait(30)
    for i in range(count):
        repo.add_rule("shared", {"description": f"w{worker}-{i}", "when": []})


def test_two_processes_adding_rules_lose_nothing(layout: WorkspaceLayout, engines: RuleEngineRepository) -> None:
    engines.create({"id": "shared", "rules": []})
    go = SPAWN.Event()
    workers = [SPAWN.Process(target=_add_rules, args=(str(layout.root), w, 100, go)) for w in range(2)]
    for proc in workers:
        proc.start()
    go.set()
    for proc in workers:
        proc.join(60)
    assert [proc.exitcode for proc in workers] == [0, 0]

    engine = stored(layout.rule_engines_dir / "shared.json")  # valid JSON, not torn
    rules = engine["rules"]
    assert len(rules) == 200
    assert len({r["id"] for r in rules}) == 200
    assert {r["description"] for r in rules} == {f"w{w}-{i}" for w in range(2) for i in range(100)}
    assert sorted(p.name for p in layout.rule_engines_dir.iterdir()) == ["shared.json"]

"""The access policy covers every method: each one is classified by what it touches (definitions,
memory reads, memory writes), a token may call only the methods its grant names, and every read or
write of memory — direct (`memory/*`, `endTurn`) or deep in a call (a pipeline's store reads, an
ingestion route's writes, a stored snapshot shown again) — is checked against the token's URI
patterns. Reads outside are refused (`memory/read`) or left out without their content (lists,
assemblies, pipeline runs, replays); writes outside are refused and write nothing. Every refusal
is logged in `log://access`. Driven through the method table, as the sidecar calls it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import ContextAssemblyError
from context_assembly.methods import METHODS, Session, call
from context_assembly.methods.access import Access, ForbiddenError, log_refusal, settings_policy
from context_assembly.pipelines.items import item_id
from context_assembly.runtime import Runtime

SECRET = "SECRET-7f3a"  # stored where the reader may not read; must never appear in its answers
REQUEST: dict[str, Any] = {
    "scope_variables": {"user": {"user_id": "u-ada"}, "thread": {"thread_id": "t-42"}},
    "input": {"text": "login timeout"},
    "explicit_memory": ["kv://notes/secret", "kv://users/u-ada", "working://t-42/plan"],
    "thread_id": "t-42",
}
POLICY = {
    "reader": {"methods": ["memory/read", "memory/list", "contextAssembly/*", "persistentMemory/execute",
                           "contextRuleEngine/test"],
               "read": ["kv://users/*", "markdown://**", "file://**"]},
    "writer": {"methods": ["memory/*", "memoryIngestion/execute", "contextAssembly/endTurn"],
               "read": ["kv://**"], "write": ["kv://notes/public/**", "working://t-1/**"]},
    "author": {"methods": ["persistentMemory/*"]},
    "caller": {},  # every method, no URI limits
    "kv-reader": {"read": ["kv://**"]},
    "wider": {"read": ["kv://**", "markdown://**"]},
}
PIPELINE = {"id": "save", "trigger": "onAction", "status": "active", "processors": [],
            "routing": [{"from": "payload", "write_to": "kv://notes/{{payload.area}}/{{payload.key}}"}]}
SECRET_MEMORY = {"id": "secret-notes", "label": "Secret notes", "status": "active",
                 "retrieval": {"pipeline": [{"type": "kv_get", "instance": "default", "namespace": "notes",
                                             "keys": ["secret"]},
                                            {"type": "kv_get", "instance": "default", "namespace": "users",
                                             "keys": ["u-bob"]}]}}
RULE_TEST = {"cases": [{"name": "shows what was included", "request": REQUEST,
                        "expect": {"items_present": [{"text": "no such text anywhere"}]}}]}

# What each method touches: "definitions" (definition files and rule engines only: governed by the
# grant's methods), "reads" / "writes" memory (checked URI by URI as well). A new method must be added.
TOUCHES: dict[str, set[str]] = {
    **{f"contextRuleEngine/{m}": {"definitions"} for m in (
        "list", "get", "create", "update", "delete", "addRule", "updateRule", "deleteRule", "evaluate",
        "traceLayout", "possibleVariables", "validate")},
    **{f"persistentMemory/{m}": {"definitions"} for m in (
        "list", "get", "create", "update", "delete", "validate", "stepSpecs")},
    **{f"memoryIngestion/{m}": {"definitions"} for m in (
        "list", "get", "create", "update", "delete", "validate", "activate", "disable", "processorSpecs")},
    **{f"contextAssembly/{m}": {"definitions"} for m in (
        "validate", "memoryTypes", "evaluateRules", "requiredVariables")},
    "contextAssembly/assemble": {"reads"}, "contextAssembly/replay": {"reads"}, "contextAssembly/diff": {"reads"},
    "contextAssembly/tracePage": {"reads"}, "contextRuleEngine/test": {"reads"}, "persistentMemory/execute": {"reads"},
    "memory/read": {"reads"}, "memory/list": {"reads"},
    "memory/write": {"writes"}, "memory/delete": {"writes"}, "contextAssembly/endTurn": {"writes"},
    "memory/event": {"writes"}, "memoryIngestion/execute": {"writes"},
}


@pytest.fixture
def workspace(example_copy: Path) -> Path:
    codebolt = example_copy / ".codebolt"
    settings = json.loads((codebolt / "context-assembly.json").read_text())
    (codebolt / "context-assembly.json").write_text(json.dumps({**settings, "snapshots": True, "access": POLICY}))
    (codebolt / "MemoryIngestion" / "save.json").write_text(json.dumps(PIPELINE))
    (codebolt / "PersistentMemory" / "secret-notes.json").write_text(json.dumps(SECRET_MEMORY))
    (codebolt / "tests" / "shown.json").write_text(json.dumps(RULE_TEST))
    runtime = Runtime(example_copy)
    try:
        for uri, value in (("kv://users/u-ada", {"tone": "terse"}), ("kv://users/u-bob", "terse too"),
                           ("kv://notes/secret", SECRET), ("working://t-42/plan", f"plan {SECRET}"),
                           ("kv://notes/public/a", "old")):
            runtime.memory.write(uri, value)
    finally:
        runtime.close()
    return example_copy


def open_session(root: Path, name: str | None) -> Session:
    session = Session(root)
    if name is not None:
        session.access = Access(name, settings_policy(session.workspace),
                                lambda error: log_refusal(session.runtime.memory, error, "test"))
    return session


@pytest.fixture
def sessions(workspace: Path) -> Iterator[dict[str | None, Session]]:
    opened = {name: open_session(workspace, name) for name in (None, "reader", "writer", "author", "caller",
                                                                "kv-reader", "stranger")}
    yield opened
    for session in opened.values():
        session.close()


def refused(session: Session, method: str, params: dict[str, Any]) -> ForbiddenError:
    with pytest.raises(ForbiddenError) as caught:
        call(session, method, params)
    assert caught.value.code == -32004
    return caught.value


def access_log(session: Session) -> list[dict[str, Any]]:
    return [e["payload"] for e in session.runtime.memory.read("log://access?limit=1000")["value"]]


def warnings(result: dict[str, Any]) -> list[str]:
    """Each warning of an assembly (those of one kind are folded into one item)."""
    return [m for i in result["context"]["warnings"] for m in i["metadata"].get("messages", [i["content"]])]


def value(session: Session, uri: str) -> Any:
    return session.runtime.memory.read(uri)["value"]


# -- every method --------------------------------------------------------------------------------


def test_every_method_is_classified_by_what_it_touches() -> None:
    assert set(TOUCHES) == set(METHODS)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_method_outside_the_grant_is_refused_logged_and_not_run(sessions: dict[str | None, Session],
                                                                  method: str) -> None:
    author = sessions["author"]  # persistentMemory/* only
    if method.startswith("persistentMemory/"):
        return
    before = len(access_log(author))
    error = refused(author, method, {"id": "x", "uri": "kv://notes/public/z", "value": 1, "trigger": "onAction",
                                     "payload": {"area": "public", "key": "z"}, "thread_id": "t-42"})
    assert error.message == f"the token 'author' may not call {method}"
    assert error.data == {"method": method, "token": "author"}
    logged = access_log(author)
    assert len(logged) == before + 1 and logged[-1]["method"] == method and logged[-1]["peer"] == "test"
    assert value(author, "kv://notes/public/z") is None  # nothing ran
    assert value(author, "working://t-42/plan") == f"plan {SECRET}"


@pytest.mark.parametrize("method", sorted(METHODS))
def test_a_token_without_an_entry_may_call_nothing(sessions: dict[str | None, Session], method: str) -> None:
    error = refused(sessions["stranger"], method, {})
    assert error.message == "the token 'stranger' has no entry in the access policy"


def test_a_broken_policy_allows_nothing_and_says_why(sessions: dict[str | None, Session], workspace: Path) -> None:
    settings = workspace / ".codebolt" / "context-assembly.json"
    settings.write_text(json.dumps({"access": {"caller": {"read": "kv://**"}}}))  # a string, not a list
    error = refused(sessions["caller"], "memory/read", {"uri": "kv://users/u-ada"})
    assert error.message.startswith("the access policy in .codebolt/context-assembly.json is invalid at "
                                    "/access/caller/read")
    settings.write_text('{"access": {"caller": ')  # not JSON at all: no policy must not mean no limits
    assert "is invalid" in refused(sessions["caller"], "memory/list", {"prefix": "kv://"}).message
    settings.write_text(json.dumps({"access": {"caller": {}}}))  # fixed: applies at once
    assert call(sessions["caller"], "memory/read", {"uri": "kv://users/u-ada"})["exists"] is True


def test_creating_definitions_needs_the_method_in_the_grant(sessions: dict[str | None, Session],
                                                            workspace: Path) -> None:
    draft = {"id": "made", "label": "Made", "retrieval": {"pipeline": []}}
    refused(sessions["reader"], "persistentMemory/create", draft)
    assert not (workspace / ".codebolt" / "PersistentMemory" / "made.json").exists()
    call(sessions["author"], "persistentMemory/create", draft)
    assert (workspace / ".codebolt" / "PersistentMemory" / "made.json").exists()
    refused(sessions["reader"], "persistentMemory/delete", {"id": "made"})
    refused(sessions["writer"], "memoryIngestion/disable", {"id": "save"})
    assert (workspace / ".codebolt" / "PersistentMemory" / "made.json").exists()


# -- reads ---------------------------------------------------------------------------------------


def test_a_read_outside_the_policy_is_refused(sessions: dict[str | None, Session]) -> None:
    reader = sessions["reader"]
    assert call(reader, "memory/read", {"uri": "kv://users/u-ada"})["value"] == {"tone": "terse"}
    assert call(reader, "memory/read", {"uri": "kv://default/users/u-ada"})["exists"] is True  # the same entry
    for uri in ("kv://notes/secret", "kv://default/notes/secret", "working://t-42/plan", "kv://users/u-ada/x",
                "log://access"):
        error = refused(reader, "memory/read", {"uri": uri})
        assert error.message == f"the token 'reader' may not read {uri}"
        assert error.data == {"method": "memory/read", "token": "reader", "uri": uri, "mode": "read"}
    assert {e["uri"] for e in access_log(reader) if e.get("mode") == "read"} >= {"kv://notes/secret",
                                                                                 "working://t-42/plan"}


def test_a_list_shows_only_what_the_token_may_read(sessions: dict[str | None, Session]) -> None:
    everything = {i["uri"] for i in call(sessions[None], "memory/list", {"prefix": "kv://"})["items"]}
    assert {"kv://users/u-ada", "kv://notes/secret"} <= everything
    shown = {i["uri"] for i in call(sessions["reader"], "memory/list", {"prefix": "kv://"})["items"]}
    assert shown == {"kv://users/u-ada", "kv://users/u-bob"}
    assert call(sessions["reader"], "memory/list", {"prefix": "working://"})["items"] == []


READS: list[tuple[str, dict[str, Any]]] = [
    ("contextAssembly/assemble", {**REQUEST, "explicit_memory": [*REQUEST["explicit_memory"], "secret-notes"]}),
    ("persistentMemory/execute", {"id": "secret-notes", "request": REQUEST}),
    ("contextRuleEngine/test", {"file": ".codebolt/tests/shown.json"}),
    ("contextAssembly/tracePage", {"request": REQUEST}),
    ("contextAssembly/diff", {"a": {**REQUEST, "explicit_memory": []}, "b": REQUEST}),
]


@pytest.mark.parametrize(("method", "params"), READS, ids=[m for m, _ in READS])
def test_what_a_call_reads_outside_the_policy_is_left_out(sessions: dict[str | None, Session], method: str,
                                                          params: dict[str, Any]) -> None:
    assert SECRET in json.dumps(call(sessions["caller"], method, params))  # it would be shown without the policy
    answer = json.dumps(call(sessions["reader"], method, params))
    assert SECRET not in answer
    assert "terse" in answer  # what it may read is still there


def test_an_assembly_shows_only_what_the_token_may_read(sessions: dict[str | None, Session], workspace: Path) -> None:
    result = call(sessions["reader"], "contextAssembly/assemble", {**REQUEST, "explicit_memory": [
        *REQUEST["explicit_memory"], "secret-notes"]})
    assert not [d for d in result["trace"]["decisions"] if d["kind"] == "access"]
    shown = warnings(result)
    for uri in ("kv://notes/secret", "working://t-42/plan"):  # named by the caller: said, not read
        assert f"memory '{uri}': outside the read patterns of the caller's token: not read" in shown
    assert ("memory 'secret-notes': step 1 (kv_get): kv://default/notes/secret is outside the read patterns of "
            "the caller's token: not read") in shown
    call_of = {c["reference"]: c for c in result["trace"]["memory_calls"]}
    assert call_of["secret-notes"]["items"] == 1  # counted as the token sees it
    assert [s["count"] for s in call_of["secret-notes"]["steps"]] == [0, 1]
    assert [i["memory_id"] for i in result["context"]["constraints"] + result["context"]["knowledge"]
            if i["memory_id"] == "secret-notes"] == ["secret-notes"]  # its readable item stays
    snapshot = workspace / result["meta"]["snapshot"]
    assert SECRET not in snapshot.read_text()  # the snapshot keeps what this caller saw


def hidden_ids(uri: str, key: Any) -> set[str]:
    return {item_id(uri, key), item_id(uri, 0)}


def test_an_assembly_says_the_same_whether_or_not_an_unreadable_address_exists(
        sessions: dict[str | None, Session]) -> None:
    """Counts, decisions with item ids and "does not exist" told a token which entries it may not
    read exist: with `log_search` fields or a vector query, what they contain."""
    memory = {"id": "probe", "label": "probe", "status": "active", "retrieval": {"pipeline": [
        {"type": "kv_get", "instance": "default", "namespace": "notes", "keys": ["${input.text}"]}]}}
    call(sessions[None], "persistentMemory/create", memory)
    answers = []
    for key in ("secret", "no-such-key"):
        request = {**REQUEST, "input": {"text": key}, "explicit_memory": [f"kv://notes/{key}", "probe"]}
        result = call(sessions["reader"], "contextAssembly/assemble", request)
        text = json.dumps(result)
        assert not hidden_ids("kv://notes/secret", "secret") & set(re.findall(r"[0-9a-f]{16}", text))
        answers.append([w.replace(key, "KEY") for w in warnings(result)])
        calls = {c["reference"]: (c["status"], c["items"]) for c in result["trace"]["memory_calls"]}
        answers.append(sorted((k.replace(key, "KEY"), v) for k, v in calls.items()))
        executed = call(sessions["reader"], "persistentMemory/execute", {"id": "probe", "request": request})
        answers.append([w.replace(key, "KEY") for w in executed["warnings"]])
    assert answers[:3] == answers[3:]
    assert "does not exist" not in json.dumps(answers)


def test_a_restricted_search_fills_its_top_k_with_what_the_token_may_read(sessions: dict[str | None, Session],
                                                                          workspace: Path) -> None:
    runtime = sessions[None].runtime
    runtime.memory.write("vector://probe/secret", {"text": "login timeout " * 3 + SECRET})
    for n in range(6):
        runtime.memory.write(f"vector://probe/public-{n}", {"text": f"login timeout note {n}"})
    search = {"id": "searching", "label": "s", "status": "active", "retrieval": {"pipeline": [
        {"type": "vector_search", "collection": "probe", "query": "login timeout", "topK": 3,
         "minScore": 0}]}}
    call(sessions[None], "persistentMemory/create", search)
    sessions["reader"].workspace()  # (the new definition is read on the next call)
    policy = json.loads((workspace / ".codebolt" / "context-assembly.json").read_text())
    policy["access"]["public"] = {"read": ["vector://probe/public-*"]}
    (workspace / ".codebolt" / "context-assembly.json").write_text(json.dumps(policy))
    public = open_session(workspace, "public")
    try:
        everyone = call(sessions[None], "persistentMemory/execute", {"id": "searching", "request": REQUEST})
        assert SECRET in json.dumps(everyone["items"])  # the best hit, without a policy
        executed = call(public, "persistentMemory/execute", {"id": "searching", "request": REQUEST})
        direct = call(public, "contextAssembly/assemble", {**REQUEST, "explicit_memory": ["vector://probe"]})
    finally:
        public.close()
    assert SECRET not in json.dumps(executed) and SECRET not in json.dumps(direct)
    assert len(executed["items"]) == 3
    assert len([i for i in direct["context"]["knowledge"] if i["source"].startswith("vector://probe/")]) == 5


def test_a_stored_snapshot_is_shown_as_the_token_may_see_it(sessions: dict[str | None, Session]) -> None:
    stored = call(sessions[None], "contextAssembly/assemble", REQUEST)["meta"]["assembly_id"]
    for method, params in (("contextAssembly/replay", {"snapshot": stored}),
                           ("contextAssembly/diff", {"a": stored, "b": {**REQUEST, "explicit_memory": []}}),
                           ("contextAssembly/tracePage", {"snapshot": stored})):
        assert SECRET in json.dumps(call(sessions["caller"], method, params)), method
        assert SECRET not in json.dumps(call(sessions["reader"], method, params)), method
    replayed = call(sessions["reader"], "contextAssembly/replay", {"snapshot": stored})
    assert replayed["drift"]["removed"] == []  # both sides are seen through the same policy


def test_a_snapshot_path_is_a_file_the_token_must_be_allowed_to_read(sessions: dict[str | None, Session],
                                                                      workspace: Path) -> None:
    """replay, diff and tracePage read any JSON file of the workspace by path: its content as a
    request, its keys in the error, and whether it exists, whatever the token's file:// policy."""
    (workspace / "secret.json").write_text(json.dumps({"api_key": SECRET}))
    stored = call(sessions[None], "contextAssembly/assemble", REQUEST)["meta"]["assembly_id"]
    kv_reader = sessions["kv-reader"]  # kv:// only
    for path in ("secret.json", ".codebolt/context-assembly.json", "no-such.json", f"./{stored}.json"):
        for method, params in (("contextAssembly/replay", {"snapshot": path}),
                               ("contextAssembly/diff", {"a": path, "b": REQUEST}),
                               ("contextAssembly/tracePage", {"snapshot": path})):
            error = refused(kv_reader, method, params)
            assert SECRET not in error.message and "api_key" not in error.message, (method, path)
    own = call(kv_reader, "contextAssembly/assemble", REQUEST)["meta"]["assembly_id"]
    assert call(kv_reader, "contextAssembly/replay", {"snapshot": own})["drifted"] in (True, False)
    snapshot_path = f".codebolt/memory/context/{own}.json"  # the snapshots folder: by path too
    assert "html" in call(kv_reader, "contextAssembly/tracePage", {"snapshot": snapshot_path})
    with pytest.raises(ContextAssemblyError) as unknown:  # a token that may read files: its file, as before
        call(sessions["reader"], "contextAssembly/diff", {"a": "secret.json", "b": REQUEST})
    assert "api_key" in json.dumps(unknown.value.data)


def replayed_input(session: Session, assembly_id: str) -> Any:
    return call(session, "contextAssembly/replay", {"snapshot": assembly_id})["request"]["input"]


def test_a_stored_snapshot_of_a_token_that_may_read_more_is_not_shown(sessions: dict[str | None, Session],
                                                                     workspace: Path) -> None:
    """A snapshot shown without the items a token may not read still had their counts, warnings
    ("... does not exist") and step traces: a token that may not read the snapshot file sees only
    snapshots assembled under its own read patterns, or some of them."""
    kv_reader = sessions["kv-reader"]  # kv:// only, no file://
    by_unrestricted = call(sessions[None], "contextAssembly/assemble", REQUEST)["meta"]
    by_reader = call(sessions["reader"], "contextAssembly/assemble", REQUEST)["meta"]
    by_itself = call(kv_reader, "contextAssembly/assemble", REQUEST)["meta"]
    wider = open_session(workspace, "wider")
    try:
        by_wider = call(wider, "contextAssembly/assemble", REQUEST)["meta"]
        assert replayed_input(wider, by_itself["assembly_id"]) == REQUEST["input"]
    finally:
        wider.close()
    for meta in (by_unrestricted, by_reader, by_wider):
        for method, params in (("contextAssembly/replay", {"snapshot": meta["assembly_id"]}),
                               ("contextAssembly/diff", {"a": meta["assembly_id"], "b": REQUEST}),
                               ("contextAssembly/tracePage", {"snapshot": meta["snapshot"]})):
            assert "may read more" in refused(kv_reader, method, params).message
    assert json.loads((workspace / by_itself["snapshot"]).read_text())["read"] == ["kv://**"]
    assert replayed_input(kv_reader, by_itself["assembly_id"]) == REQUEST["input"]


def test_an_active_file_outside_the_policy_is_left_out(sessions: dict[str | None, Session]) -> None:
    request = {**REQUEST, "additional_variables": {"active_file": "src/auth/login.py"}}
    result = call(sessions["kv-reader"], "contextAssembly/assemble", request)
    assert not [i for i in result["context"]["state"] if i["source"].startswith("file://")]
    said = "the active file 'src/auth/login.py' is outside the read patterns of the caller's token: not read"
    assert f"Warning: {said}" in warnings(result)
    missing = call(sessions["kv-reader"], "contextAssembly/assemble",
                   {**REQUEST, "additional_variables": {"active_file": "src/no/such.py"}})
    assert f"Warning: {said}".replace("auth/login", "no/such") in warnings(missing)  # the same, there or not


# -- writes --------------------------------------------------------------------------------------


def test_a_write_outside_the_policy_is_refused_and_nothing_is_written(sessions: dict[str | None, Session]) -> None:
    writer = sessions["writer"]
    assert call(writer, "memory/write", {"uri": "kv://notes/public/b", "value": "ok"})["written"] is True
    for method, params in (("memory/write", {"uri": "kv://users/u-ada", "value": "x"}),
                           ("memory/write", {"uri": "kv://notes/public", "value": "x"}),
                           ("memory/delete", {"uri": "kv://notes/secret"})):
        error = refused(writer, method, params)
        assert error.message == f"the token 'writer' may not write {params['uri']}"
        assert error.data["mode"] == "write"
    assert value(writer, "kv://users/u-ada") == {"tone": "terse"}
    assert value(writer, "kv://notes/secret") == SECRET
    assert value(writer, "kv://notes/public") is None


def test_ending_a_turn_needs_the_right_to_write_its_working_memory(sessions: dict[str | None, Session]) -> None:
    writer = sessions["writer"]
    error = refused(writer, "contextAssembly/endTurn", {"thread_id": "t-42"})
    assert error.message == "the token 'writer' may not write working://t-42"
    assert value(writer, "working://t-42/plan") == f"plan {SECRET}"
    writer.runtime.memory.write("working://t-1/note", "scratch")
    # cleared, and not counted: the token may not read working:// (the count would tell what it held)
    assert call(writer, "contextAssembly/endTurn", {"thread_id": "t-1"}) == {"thread_id": "t-1"}
    assert writer.runtime.memory.read("working://t-1/note")["exists"] is False


@pytest.mark.parametrize("method", ["memory/event", "memoryIngestion/execute"])
def test_an_ingestion_route_outside_the_policy_writes_nothing(sessions: dict[str | None, Session],
                                                             method: str) -> None:
    writer = sessions["writer"]
    params: dict[str, Any] = {"trigger": "onAction"} if method == "memory/event" else {"id": "save"}
    inside = call(writer, method, {**params, "payload": {"area": "public", "key": "c"}})
    outside = call(writer, method, {**params, "payload": {"area": "private", "key": "c"}})
    assert value(writer, "kv://notes/public/c") == {"area": "public", "key": "c"}
    assert value(writer, "kv://notes/private/c") is None
    text = json.dumps(inside)
    assert "kv://notes/public/c" in text and "may not write" not in text
    assert "the token 'writer' may not write kv://notes/private/c" in json.dumps(outside)
    logged = access_log(writer)[-1]
    assert (logged["method"], logged["uri"], logged["mode"]) == (method, "kv://notes/private/c", "write")


@pytest.mark.parametrize("after_grouping", [
    [{"type": "group_by", "field": "metadata.instance"}],
    [{"type": "annotate", "fields": {"sources": ["kv://users/u-ada"]}}],
])
def test_a_pipeline_cannot_launder_what_its_items_came_from(sessions: dict[str | None, Session],
                                                           after_grouping: list[dict[str, Any]]) -> None:
    """A second group_by kept only the inner groups' own sources, and annotate could set `sources`:
    a reader of kv://users/* got the secret note through persistentMemory/execute and assemble."""
    steps = [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["u-ada"]},
             {"type": "kv_get", "instance": "default", "namespace": "notes", "keys": ["secret"]},
             {"type": "group_by", "field": "metadata.instance"}, *after_grouping]
    call(sessions[None], "persistentMemory/create", {"id": "laundered", "label": "l", "status": "active",
                                                     "retrieval": {"pipeline": steps}})
    reader = sessions["reader"]
    try:
        executed = call(reader, "persistentMemory/execute", {"id": "laundered", "request": REQUEST})
        assembled = call(reader, "contextAssembly/assemble", {**REQUEST, "explicit_memory": ["laundered"]})
    except ContextAssemblyError as exc:  # annotate refusing to set `sources` is a failure of the step
        assert "sources" in exc.message
        return
    assert SECRET not in json.dumps(executed) and SECRET not in json.dumps(assembled)


def test_an_item_names_its_source_as_a_uri_that_reads_it_back(sessions: dict[str | None, Session],
                                                              workspace: Path) -> None:
    """Step-made sources were written unencoded: a note named `a%41` was named `markdown://a%41`,
    which is the note `aA`, so a token that may read `aA` was shown it."""
    runtime = sessions[None].runtime
    names = {"kv": ("kv://default/deals/50%25 off%2Fnow%3F", "50% off/now?"), "markdown": ("markdown://a%2541", "a%41")}
    runtime.memory.write(names["kv"][0], f"kv {SECRET}")
    runtime.memory.write(names["markdown"][0], f"note {SECRET}")
    steps = [{"type": "kv_get", "instance": "default", "namespace": "deals", "keys": [names["kv"][1]]},
             {"type": "markdown_read", "note": names["markdown"][1]}]
    call(sessions[None], "persistentMemory/create", {"id": "odd-names", "label": "o", "status": "active",
                                                     "retrieval": {"pipeline": steps}})
    items = call(sessions[None], "persistentMemory/execute", {"id": "odd-names", "request": REQUEST})["items"]
    assert [runtime.memory.read(i["source"])["value"] for i in items] == [f"kv {SECRET}", f"note {SECRET}"]
    policy = json.loads((workspace / ".codebolt" / "context-assembly.json").read_text())
    policy["access"]["look-alike"] = {"read": ["markdown://aA", "kv://deals/50% off"]}
    (workspace / ".codebolt" / "context-assembly.json").write_text(json.dumps(policy))
    look_alike = open_session(workspace, "look-alike")
    try:
        executed = call(look_alike, "persistentMemory/execute", {"id": "odd-names", "request": REQUEST})
    finally:
        look_alike.close()
    assert executed["items"] == [] and SECRET not in json.dumps(executed)

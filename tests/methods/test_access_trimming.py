"""Security trimming: what a restricted token may not read never shapes what it is answered.

Each case asks the same question twice, once with something hidden (an entry, a document, a node,
turns of a thread) and once without, and expects the same answer: no count, score, status, branch,
source spelling or path may tell the token that the hidden thing exists or what it holds. Driven
through the method table, as the sidecar calls it, over the shipped embedded stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from context_assembly.errors import ContextAssemblyError, ForbiddenError
from context_assembly.methods import Session, call
from context_assembly.methods.access import Access, log_refusal, settings_policy

SECRET = "SECRET-51c2"
REQUEST: dict[str, Any] = {"scope_variables": {"thread": {"thread_id": "t-42"}}, "input": {"text": "login timeout"},
                           "thread_id": "t-42"}
POLICY: dict[str, Any] = {
    "reader": {"read": ["kv://users/*", "markdown://**"]},
    "key-a": {"read": ["kv://notes/A"]},
    "key-notes": {"read": ["kv://notes"]},
    "team-public": {"read": ["kv://team/public/*"]},
    "doc-a": {"read": ["vector://probe/A"]},
    "public": {"read": ["vector://probe/public-*"]},
    "nodes": {"read": ["graph://default/node/public-*", "graph://default/edge/**", "kv://**"]},
    "docs": {"read": ["file://docs/**"]},
    "drop-box": {"read": [], "write": ["kv://**", "working://**", "json://**", "episodic://**", "log://**"]},
    "other-box": {"read": [], "write": ["kv://**", "episodic://**", "log://**"]},
    "third-box": {"read": [], "write": ["kv://**", "episodic://**", "log://**"]},
}
Open = Callable[[str | None], Session]


@pytest.fixture
def workspace(example_copy: Path) -> Path:
    path = example_copy / ".codebolt" / "context-assembly.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "access": POLICY}))
    return example_copy


@pytest.fixture
def opener(workspace: Path) -> Iterator[Open]:
    opened: list[Session] = []

    def open_(name: str | None) -> Session:
        session = Session(workspace)
        if name is not None:
            session.access = Access(name, settings_policy(session.workspace),
                                    lambda error: log_refusal(session.runtime.memory, error, "test"))
        opened.append(session)
        return session

    yield open_
    for session in opened:
        session.close()


@pytest.fixture
def admin(opener: Open) -> Session:
    return opener(None)


def create(admin: Session, memory_id: str, steps: list[dict[str, Any]]) -> None:
    call(admin, "persistentMemory/create", {"id": memory_id, "label": memory_id, "status": "active",
                                            "retrieval": {"pipeline": steps}})


def executed(session: Session, memory_id: str, request: dict[str, Any] | None = None) -> dict[str, Any]:
    return call(session, "persistentMemory/execute", {"id": memory_id, "request": request or REQUEST})


def sources(result: dict[str, Any]) -> list[str]:
    return sorted(i["source"] for section in result["context"].values() for i in section)


# -- derived variables -----------------------------------------------------------------------------


def test_the_turn_count_of_a_thread_the_token_may_not_read_is_absent(admin: Session, opener: Open) -> None:
    for n in range(7):
        admin.runtime.memory.write("episodic://t-secret", {"role": "user", "content": f"{SECRET} {n}"})
    create(admin, "branching", [{"type": "conditional",
                                 "condition": {"field": "addVar.turn_count", "operator": "gt", "value": 2},
                                 "then_steps": [], "else_steps": []}])
    reader = opener("reader")
    answers = []
    for thread in ("t-secret", "t-empty"):
        request = {**REQUEST, "thread_id": thread, "scope_variables": {"thread": {"thread_id": thread}}}
        evaluated = call(reader, "contextAssembly/evaluateRules", request)
        assembled = call(reader, "contextAssembly/assemble", {**request, "explicit_memory": ["branching"]})
        branch = {c["reference"]: c for c in assembled["trace"]["memory_calls"]}["branching"]["steps"][0]["branch"]
        answers.append((evaluated["derived_variables"], branch))
    assert answers[0] == answers[1] == ({}, "else_steps")
    assert call(admin, "contextAssembly/evaluateRules", {**REQUEST, "thread_id": "t-secret"})[
        "derived_variables"] == {"addVar.turn_count": 7}  # (counted for a caller who may read it)


# -- direct references -----------------------------------------------------------------------------


def test_a_hidden_key_does_not_decide_between_key_and_namespace(admin: Session, opener: Open) -> None:
    admin.runtime.memory.write("kv://users/u-ada", "terse")
    reader = opener("reader")  # kv://users/*, not the key `users` of the default namespace
    request = {**REQUEST, "explicit_memory": ["kv://users"]}
    before = sources(call(reader, "contextAssembly/assemble", request))
    admin.runtime.memory.write("kv://users", SECRET)
    assert sources(call(reader, "contextAssembly/assemble", request)) == before
    assert "kv://users/u-ada" in before


def test_a_namespace_of_hidden_entries_answers_as_an_empty_one(admin: Session, opener: Open) -> None:
    reader = opener("key-notes")  # the key `notes`, no entry of the namespace `notes`
    request = {**REQUEST, "explicit_memory": ["kv://notes"]}

    def outcome() -> Any:
        result = call(reader, "contextAssembly/assemble", request)
        memory_call = {c["reference"]: c for c in result["trace"]["memory_calls"]}["kv://notes"]
        return memory_call["status"], memory_call["items"], memory_call["error"]

    empty = outcome()
    admin.runtime.memory.write("kv://notes/secret", SECRET)
    assert outcome() == empty


@pytest.mark.parametrize(("hidden", "token", "reference"), [
    ("kv://notes/%2541", "key-a", "kv://notes"),  # the key `%41` was listed as kv://notes/%41: the key `A`
    ("kv://default/team/public%2Fsecret", "team-public", "kv://team"),  # as kv://team/public/secret
])
def test_a_listed_entry_is_named_by_a_uri_that_reads_it_back(admin: Session, opener: Open, hidden: str, token: str,
                                                             reference: str) -> None:
    admin.runtime.memory.write(hidden, f"hidden {SECRET}")
    listed = call(admin, "contextAssembly/assemble", {**REQUEST, "explicit_memory": [reference]})
    [source] = [s for s in sources(listed) if s.startswith("kv://") and "state" not in s]
    assert call(admin, "memory/read", {"uri": source})["value"] == f"hidden {SECRET}"
    assert SECRET not in json.dumps(call(opener(token), "contextAssembly/assemble",
                                         {**REQUEST, "explicit_memory": [reference]}))


# -- searches --------------------------------------------------------------------------------------


def test_a_hit_is_named_by_the_uri_of_its_document(admin: Session, opener: Open) -> None:
    admin.runtime.memory.write("vector://probe/%2541", {"text": f"login timeout {SECRET}"})  # the document `%41`
    admin.runtime.memory.write("vector://probe/A", {"text": "login timeout readable"})
    create(admin, "searching", [{"type": "vector_search", "collection": "probe", "query": "login timeout",
                                 "topK": 5, "minScore": 0}])
    everyone = executed(admin, "searching")["items"]
    assert sorted(i["source"] for i in everyone) == ["vector://probe/%2541", "vector://probe/A"]
    reader = opener("doc-a")
    for answer in (executed(reader, "searching"),
                   call(reader, "contextAssembly/assemble", {**REQUEST, "explicit_memory": ["vector://probe"]})):
        assert SECRET not in json.dumps(answer) and "readable" in json.dumps(answer)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_hidden_documents_change_neither_the_hits_nor_their_scores(admin: Session, opener: Open, mode: str) -> None:
    """Fetching a fixed 4x emptied the answer behind four better hidden hits, and hybrid scores were
    fused over the hidden documents' ranks (one hidden chunk above: 0.984 instead of 1.0)."""
    admin.runtime.memory.write("vector://probe/public-0", {"text": "login timeout note about sessions"})
    create(admin, "searching", [{"type": "vector_search", "collection": "probe", "query": "login timeout",
                                 "topK": 1, "minScore": 0, "mode": mode}])
    public = opener("public")

    def hits() -> list[tuple[str, float]]:
        return [(i["source"], i["score"]) for i in executed(public, "searching")["items"]]

    alone = hits()
    for n in range(6):
        admin.runtime.memory.write(f"vector://probe/secret-{n}", {"text": f"login timeout {SECRET} login timeout"})
    assert hits() == alone == [("vector://probe/public-0", alone[0][1])]
    assert executed(admin, "searching")["items"][0]["source"].startswith("vector://probe/secret-")


def test_a_hybrid_score_does_not_say_what_a_hidden_document_holds(admin: Session, opener: Open) -> None:
    admin.runtime.memory.write("vector://probe/public-0", {"text": "login timeout note about sessions"})
    create(admin, "searching", [{"type": "vector_search", "collection": "probe", "query": "login hunter2",
                                 "topK": 3, "minScore": 0, "mode": "hybrid"}])
    public = opener("public")
    scores = []
    for guess in ("swordfish", "hunter2"):
        admin.runtime.memory.write("vector://probe/secret-0", {"text": f"the deploy password is {guess}"})
        scores.append([(i["source"], i["score"]) for i in executed(public, "searching")["items"]])
    assert scores[0] == scores[1] and [s for s, _ in scores[0]] == ["vector://probe/public-0"]


# -- the graph -------------------------------------------------------------------------------------


@pytest.fixture
def graph(admin: Session) -> Any:
    memory = admin.runtime.memory
    for node in ("public-a", "hidden-b", "public-c", "public-d"):
        memory.write(f"graph://default/node/{node}", {"kind": "module", "name": node,
                                                      "attributes": {"x": SECRET} if "hidden" in node else {}})
    for edge, (start, end) in {"e1": ("public-a", "hidden-b"), "e2": ("hidden-b", "public-c"),
                               "e3": ("public-a", "public-d")}.items():
        memory.write(f"graph://default/edge/{edge}", {"kind": "calls", "from": start, "to": end,
                                                      "attributes": {"why": f"edge {SECRET}"} if edge == "e1" else {}})
    memory.write("kv://seeds/a", {"node": "a"})
    create(admin, "expanding", [{"type": "kv_get", "instance": "default", "namespace": "seeds", "keys": ["a"]},
                                {"type": "annotate", "fields": {"node_id": "${input.text}"}, "provenance": False},
                                {"type": "graph_neighbor_expand", "depth": 2, "limit": 5}])
    return memory


def test_an_expansion_never_crosses_a_node_the_token_may_not_read(admin: Session, opener: Open, graph: Any) -> None:
    request = {**REQUEST, "input": {"text": "public-a"}}
    assert "public-c" in json.dumps(executed(admin, "expanding", request))  # through hidden-b
    answer = executed(opener("nodes"), "expanding", request)
    assert [i["source"] for i in answer["items"][1:]] == ["graph://default/node/public-d"]
    assert "hidden-b" not in json.dumps(answer) and SECRET not in json.dumps(answer)


def test_an_expansion_from_a_hidden_seed_answers_as_from_a_missing_one(opener: Open, graph: Any) -> None:
    nodes = opener("nodes")
    answers = [executed(nodes, "expanding", {**REQUEST, "input": {"text": seed}})["items"][1:]
               for seed in ("hidden-b", "no-such-node")]
    assert answers[0] == answers[1] == []


# -- files ---------------------------------------------------------------------------------------


def test_a_link_in_a_readable_folder_reads_only_what_the_token_may_read(admin: Session, opener: Open,
                                                                          workspace: Path) -> None:
    """`file://` patterns were matched against the path as written: a link under docs/ to a file
    outside it was read by a token that may read docs/** only."""
    (workspace / "secret").mkdir()
    (workspace / "secret" / "s.txt").write_text(SECRET)
    (workspace / "docs").mkdir(exist_ok=True)
    (workspace / "docs" / "guide.txt").write_text("the guide")
    (workspace / "docs" / "link.txt").symlink_to(Path("..") / "secret" / "s.txt")
    (workspace / "docs" / "alias.txt").symlink_to("guide.txt")
    create(admin, "reading", [{"type": "file_read", "path": "docs/link.txt"},
                              {"type": "file_read", "path": "docs/alias.txt"}])
    assert SECRET in json.dumps(executed(admin, "reading"))  # (what the link leads to)
    docs = opener("docs")
    with pytest.raises(ForbiddenError):
        call(docs, "memory/read", {"uri": "file://docs/link.txt"})
    assert call(docs, "memory/read", {"uri": "file://docs/alias.txt"})["value"] == "the guide"
    request = {**REQUEST, "additional_variables": {"active_file": "docs/link.txt"},
               "explicit_memory": ["file://docs/link.txt"]}
    answers = [executed(docs, "reading"), call(docs, "contextAssembly/assemble", request)]
    assert SECRET not in json.dumps(answers) and "the guide" in json.dumps(answers[0])
    (workspace / "docs" / "loop").symlink_to("loop")  # refused by the store as for anyone, not a crash
    with pytest.raises(ContextAssemblyError) as looped:
        call(docs, "memory/read", {"uri": "file://docs/loop"})
    assert looped.value.code != -32603


# -- rules -----------------------------------------------------------------------------------------


def test_an_exclusion_names_things_as_people_write_them(admin: Session, workspace: Path) -> None:
    """Sources are encoded URIs (`markdown://meeting%20notes/q3`); an exclusion written with the
    name as typed still removes the note."""
    notes = workspace / ".codebolt" / "memory" / "meeting notes"
    notes.mkdir(parents=True)
    (notes / "q3.md").write_text("# Q3\nlogin timeout decisions\n")
    engine = {"id": "hide", "name": "hide", "enabled": True, "rules": [
        {"id": "no-meetings", "name": "no meeting notes", "priority": 1,
         "when": [{"field": "input.text", "operator": "contains", "value": "login"}],
         "then": {"add_memories": ["meetings"], "exclude_memories": ["markdown://meeting notes/*"]}}]}
    (workspace / ".codebolt" / "context-rule-engines" / "hide.json").write_text(json.dumps(engine))
    create(admin, "meetings", [{"type": "markdown_read", "note": "meeting notes/q3"}])
    result = call(admin, "contextAssembly/assemble", REQUEST)
    assert "markdown://meeting%20notes/q3" not in sources(result)
    assert [d["source"] for d in result["trace"]["decisions"] if d["kind"] == "excluded"] == [
        "markdown://meeting%20notes/q3"]


def test_an_exclusion_never_reads_a_slash_inside_a_name_as_a_separator(admin: Session, workspace: Path) -> None:
    """`kv://notes/*` (the entries of the namespace `notes`) excluded the key named `notes/x` of the
    default namespace (`kv://notes%2Fx`) once sources were also matched decoded."""
    engine = {"id": "ex", "name": "ex", "enabled": True, "rules": [
        {"id": "drop-notes", "name": "drop the notes namespace", "priority": 1,
         "when": [{"field": "input.text", "operator": "contains", "value": "login"}],
         "then": {"add_memories": ["kv://notes%2Fx"], "exclude_memories": ["kv://notes/*"]}}]}
    (workspace / ".codebolt" / "context-rule-engines" / "ex.json").write_text(json.dumps(engine))
    admin.runtime.memory.write("kv://notes%2Fx", "the key notes/x")
    result = call(admin, "contextAssembly/assemble", REQUEST)
    assert "the key notes/x" in json.dumps(result["context"])


def test_a_pipeline_run_alone_sees_the_variables_an_assembly_derives(admin: Session) -> None:
    """persistentMemory/execute built its variables without the derived ones: a definition reading
    `${addVar.turn_count}` ran otherwise than in an assembly."""
    for n in range(3):
        admin.runtime.memory.write("episodic://t-42", {"role": "user", "content": f"turn {n}"})
    admin.runtime.memory.write("kv://users/u-ada", "terse")
    create(admin, "counting", [{"type": "kv_get", "instance": "default", "namespace": "users", "keys": ["u-ada"]},
                               {"type": "annotate", "fields": {"turns": "${addVar.turn_count}"}}])
    assembled = call(admin, "contextAssembly/assemble", {**REQUEST, "explicit_memory": ["counting"]})
    [shown] = [i for section in assembled["context"].values() for i in section if i["memory_id"] == "counting"]
    assert executed(admin, "counting")["items"][0]["metadata"]["turns"] == shown["metadata"]["turns"] == 3



# -- a token that may write but not read -----------------------------------------------------------


def test_a_write_only_token_learns_nothing_of_what_it_deletes_or_clears(admin: Session, opener: Open) -> None:
    admin.runtime.memory.write("kv://box/held", SECRET)
    for key in ("a", "b", "c"):
        admin.runtime.memory.write(f"working://t-full/{key}", SECRET)
    writer = opener("drop-box")
    held, missing = (call(writer, "memory/delete", {"uri": f"kv://box/{key}"}) for key in ("held", "missing"))
    assert (held, missing) == ({"uri": "kv://box/held", "deleted": True}, {"uri": "kv://box/missing", "deleted": True})
    assert admin.runtime.memory.read("kv://box/held")["exists"] is False  # deleted all the same
    full, empty = (call(writer, "contextAssembly/endTurn", {"thread_id": t}) for t in ("t-full", "t-empty"))
    assert (full, empty) == ({"thread_id": "t-full"}, {"thread_id": "t-empty"})  # no count
    assert admin.runtime.memory.read("working://t-full/a")["exists"] is False
    admin.runtime.memory.write("working://t-again/a", 1)
    assert call(admin, "contextAssembly/endTurn", {"thread_id": "t-again"}) == {"thread_id": "t-again", "cleared": 1}
    assert call(admin, "memory/delete", {"uri": "kv://box/missing"})["deleted"] is False  # (told a reader)


def test_a_write_only_token_may_not_patch_into_a_document(admin: Session, opener: Open) -> None:
    admin.runtime.memory.write("json://held", {"a": {"b": 1}})
    writer = opener("drop-box")
    for uri in ("json://held#/a/b", "json://missing#/a/b"):  # the same refusal: it would tell which exists
        with pytest.raises(ForbiddenError) as refused:
            call(writer, "memory/write", {"uri": uri, "value": 2})
        assert refused.value.data["mode"] == "read"
    assert admin.runtime.memory.read("json://held")["value"] == {"a": {"b": 1}}
    assert call(writer, "memory/write", {"uri": "json://fresh", "value": {"x": 1}})["written"] is True  # whole


@pytest.mark.parametrize("uri", ["episodic://t-keys", "log://drops"])
def test_a_tokens_idempotency_keys_are_its_own(admin: Session, opener: Open, uri: str) -> None:
    """Another token's key answered `duplicate` for its value and Conflict for any other: an oracle
    on whether a key was used, and on what was appended with it."""
    value = {"role": "user", "content": SECRET} if uri.startswith("episodic") else {"event_type": "x", "s": SECRET}
    guess = {**value, ("content" if "content" in value else "s"): "a guess"}
    mine = opener("drop-box")
    assert call(mine, "memory/write", {"uri": uri, "value": value, "idempotency_key": "k-1"}) == {
        "uri": uri, "written": True}
    for name, sent in (("other-box", value), ("third-box", guess)):  # the same answer whatever the guess
        assert call(opener(name), "memory/write", {"uri": uri, "value": sent, "idempotency_key": "k-1"}) == {
            "uri": uri, "written": True}
    assert call(mine, "memory/write", {"uri": uri, "value": value, "idempotency_key": "k-1"})["duplicate"] is True
    with pytest.raises(ContextAssemblyError) as conflict:  # (its own retry with another value, as before)
        call(mine, "memory/write", {"uri": uri, "value": guess, "idempotency_key": "k-1"})
    assert conflict.value.code == -32003 and "'k-1'" in conflict.value.message
    assert conflict.value.data["idempotency_key"] == "k-1"
    assert len(admin.runtime.memory.read(uri + "?limit=100")["value"]) == 3  # each token's own append


def test_a_tokens_ingestion_keys_are_its_own(admin: Session, opener: Open) -> None:
    call(admin, "memoryIngestion/create", {"id": "drops", "trigger": "onAction", "status": "active", "processors": [],
                                           "routing": [{"from": "payload", "write_to": "kv://drops/{{payload.k}}"}]})
    mine = opener("drop-box")
    first = call(mine, "memory/event", {"trigger": "onAction", "payload": {"k": "a", "s": SECRET},
                                        "idempotency_key": "e-1"})
    answers = []
    for name, payload in (("other-box", {"k": "a", "s": SECRET}), ("third-box", {"k": "a", "s": "a guess"})):
        answers.append(call(opener(name), "memory/event", {"trigger": "onAction", "payload": payload,
                                                           "idempotency_key": "e-1"}))  # no replay, no Conflict
    again = call(mine, "memory/event", {"trigger": "onAction", "payload": {"k": "a", "s": SECRET},
                                        "idempotency_key": "e-1"})
    mine_run = first["executions"][0]
    for answer in answers:  # each ran as its own: not the recorded run of another's event
        run = answer["executions"][0]
        assert "duplicate" not in run and run["status"] == "ok" and run["execution_id"] != mine_run["execution_id"]
    assert again["executions"][0]["duplicate"] is True  # (its own retry is a retry still)
    assert again["executions"][0]["execution_id"] == mine_run["execution_id"]

"""Writing a checked import (`stores.importer.ImportPlan`) all or nothing, and saying what was written.

An import is written as at most three units, each all or nothing:

- `database`: one transaction of the database the stores share (`StoreSet.batch()`): embedded,
  the SQLite database of KV, JSON, working memory, blobs, the event log, episodic turns and vector
  documents; PostgreSQL, all of those and the knowledge graph. Collection settings files the
  import creates are removed again when it rolls back;
- `graph` (embedded only): the LadybugDB graph, one transaction of its own;
- `notes`: markdown notes, written to temp files beside them first, then renamed into place
  (all, or none: a failed rename puts back the notes already replaced).

Steps: stage the notes; open the database transaction; write everything else into it, the graph
last (embedded: its transaction commits there); commit the database; rename the notes. A failure
anywhere before the database's commit leaves every store as it was. Only the last steps can split
an import: the database's commit failing after the embedded graph committed, or a rename failing
after the database committed; the error then says which units committed and which rolled back.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

from attrs import define

from ..errors import ContextAssemblyError, InvalidParamsError
from .importer import ImportPlan
from .interfaces import StagedWrites
from .kuzu.graph import load_graph_entries
from .memory import MemoryRouter
from .uri import parse_uri, render

COMMITTED, ROLLED_BACK, NOT_WRITTEN, PARTLY = "committed", "rolled back", "not written", "partly written"
_WRITING = "writing"  # begun, not committed yet


@define
class _Unit:
    name: str
    schemes: list[str]
    state: str = NOT_WRITTEN

    def as_dict(self) -> dict[str, Any]:
        return {"unit": self.name, "schemes": self.schemes, "state": self.state}


@define
class _Run:
    """One import under way: its units, what it wrote, and where it is (for the failure report)."""

    memory: MemoryRouter
    plan: ImportPlan
    units: dict[str, _Unit]
    written: Counter[str]
    at: tuple[str, str | None] = ("database", None)  # (unit, JSON pointer of the item being written)
    skipped: dict[str, int] | None = None

    def enter(self, scheme: str, pointer: str | None) -> _Unit:
        """The unit writing `scheme` begins the item at `pointer`."""
        batched = self.memory.stores.batched
        name = "database" if scheme in batched else "notes" if scheme == "markdown" else scheme
        unit = self.units[name]
        self.at = (name, pointer)
        if unit.state == NOT_WRITTEN:
            unit.state = _WRITING
        return unit

    def settle(self, old: str, new: str, *, notes: bool = False) -> None:
        for unit in self.units.values():
            if unit.state == old and (unit.name == "notes") == notes:
                unit.state = new


def _units(memory: MemoryRouter, plan: ImportPlan) -> dict[str, _Unit]:
    schemes = {parse_uri(uri).scheme for _pointer, uri, _value in plan.writes}
    schemes |= {"episodic"} if plan.threads else set()
    schemes |= {"log"} if plan.events else set()
    schemes |= {"vector"} if plan.collections else set()
    schemes |= {"graph"} if plan.nodes or plan.edges else set()
    batched = memory.stores.batched
    # In the order they commit: stores outside the database (the embedded graph), the database, the notes.
    units = {scheme: _Unit(scheme, [scheme]) for scheme in sorted(schemes - batched)}
    if schemes & batched:
        units["database"] = _Unit("database", sorted(schemes & batched))
    if plan.notes:
        units["notes"] = _Unit("notes", ["markdown"])
    return units


def apply_import(memory: MemoryRouter, plan: ImportPlan) -> dict[str, Any]:
    """Write `plan` (see the module docstring for the guarantee); what was written, per store and unit.
    On failure, the error (of the class the failing store raised) says where it failed and, in its
    message and `data["import"]`, what each unit did."""
    run = _Run(memory, plan, _units(memory, plan), Counter())
    staged: StagedWrites | None = None
    settings: StagedWrites | None = None
    database_done = False
    try:
        if plan.notes:
            run.enter("markdown", None)
            staged = memory.notes.stage(plan.notes)
        run.at = ("database", None)  # opening it (an unreachable server fails here)
        if memory.vectors is not None and _collections(plan):
            settings = memory.vectors.stage_settings(_collections(plan))
        with memory.stores.batch() if "database" in run.units else contextlib.nullcontext():
            _write_database(run)
            run.at = ("database", None)  # the commit
        database_done = True
        run.settle(_WRITING, COMMITTED)
        run.settle(PARTLY, COMMITTED)
        if settings is not None:  # the files of new collections, now that their documents are in
            run.at = ("database", "/collections")
            settings.commit()
        if staged is not None:
            run.at = ("notes", None)
            run.written["markdown"] = staged.commit()
            run.settle(_WRITING, COMMITTED, notes=True)
    except BaseException as exc:
        for held in (staged, settings):
            if held is not None:
                held.discard()
        if not database_done:
            run.settle(_WRITING, ROLLED_BACK)
        run.settle(_WRITING, ROLLED_BACK if database_done else NOT_WRITTEN, notes=True)
        if isinstance(exc, ContextAssemblyError):
            raise _failure(run, exc) from exc
        raise
    return _report(run)


def _write_database(run: _Run) -> None:
    """Everything but the notes, inside the database's batch (the graph last, in its own transaction)."""
    memory, plan = run.memory, run.plan
    for name, wanted in plan.collections.items():  # before their documents (held by `stage_settings`)
        run.enter("vector", "/collections/" + name)
        assert memory.vectors is not None  # checked by the plan
        memory.vectors.settings(name, wanted.get("embedding_model"))
    for pointer, uri, value in plan.writes:
        scheme = uri.split("://", 1)[0]
        unit = run.enter(scheme, pointer)
        memory.write(uri, value)
        run.written[scheme] += 1
        if unit.name != "database":
            unit.state = PARTLY  # a store outside the database writes as it goes
    for thread_id, turns in plan.threads.items():
        run.enter("episodic", "/threads/" + _escape(thread_id))
        thread = render("episodic", (thread_id,))  # the name as given: "sprint%2024" is not "sprint 24"
        memory.delete(thread)
        for turn in turns:
            memory.write(thread, turn)
            run.written["episodic"] += 1
    _write_events(run)
    if plan.nodes or plan.edges:
        unit = run.enter("graph", "/graph" if plan.graph_data != (0, 0) else None)
        load_graph_entries(memory.graph, plan.nodes, plan.edges)
        run.written["graph"] += len(plan.nodes) + len(plan.edges)
        if unit.name != "database":
            unit.state = COMMITTED  # its own transaction has committed; the database's comes next


def _write_events(run: _Run) -> None:
    memory, plan = run.memory, run.plan
    for instance, events in (plan.events or {}).items():
        if memory.events.search(instance, limit=1):
            # already imported (or written): appending again would duplicate the log
            run.skipped = {**(run.skipped or {}), instance: len(events)}
            continue
        run.enter("log", "/events/" + _escape(instance))
        for event in events:
            memory.write(render("log", (instance,)), event)
            run.written["log"] += 1


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _collections(plan: ImportPlan) -> dict[str, dict[str, Any]]:
    """Every collection the import writes: name -> the settings its `collections` entry gives."""
    named: dict[str, dict[str, Any]] = dict(plan.collections)
    for _pointer, uri, _value in plan.writes:
        if uri.startswith("vector://"):
            named.setdefault(parse_uri(uri).parts[0], {})
    return named


def _report(run: _Run) -> dict[str, Any]:
    plan = run.plan
    counts: dict[str, Any] = {
        "writes": len(plan.writes) + len(plan.notes) + plan.graph_writes, "threads": len(plan.threads),
        "turns": run.written["episodic"], "nodes": plan.graph_data[0], "edges": plan.graph_data[1],
        "stores": dict(plan.stores)}
    if plan.events is not None:
        counts["events"] = run.written["log"]
    counts["written"] = {scheme: count for scheme, count in sorted(run.written.items()) if count}
    if run.skipped:
        counts["skipped"] = {"events": run.skipped}
    counts["units"] = [unit.as_dict() for unit in run.units.values()]
    return counts


def _failure(run: _Run, exc: ContextAssemblyError) -> ContextAssemblyError:
    """`exc` said again with where the import failed and what each unit did."""
    unit, pointer = run.at
    committed = [u for u in run.units.values() if u.state == COMMITTED]
    undone = [u for u in run.units.values() if u.state == ROLLED_BACK]
    partly = [u for u in run.units.values() if u.state == PARTLY]
    where = f" at {pointer}" if pointer else ""
    message = f"import failed in {unit}{where}: {exc.message.rstrip('.')}."
    if undone:
        message += " Rolled back: " + ", ".join(_named(u) for u in undone) + "."
    if partly:
        message += " Partly written (not transactional): " + ", ".join(_named(u) for u in partly) + "."
    message += (" Already committed: " + ", ".join(_named(u) for u in committed) + "." if committed
                else " Nothing was written." if not partly else "")
    report = {"failed": {"unit": unit, "at": pointer}, "units": [u.as_dict() for u in run.units.values()]}
    if isinstance(exc, InvalidParamsError):
        errors = [{**e, "path": (pointer or "") + _inside(str(e.get("path") or ""))} for e in exc.errors]
        failure: ContextAssemblyError = InvalidParamsError(message, errors)
    else:
        failure = type(exc)(message, {**exc.data})
    failure.data["import"] = report
    return failure


def _inside(path: str) -> str:
    """A store's error path (`/value/x`, `/uri`) below the import item that failed."""
    return path if path.startswith("/value") or path == "/uri" else ""


def _named(unit: _Unit) -> str:
    return unit.name if unit.schemes == [unit.name] else f"{unit.name} ({', '.join(unit.schemes)})"

"""Writing a checked import (`stores.importer.ImportPlan`) all or nothing, and saying what was written.

The import is written in at most three transactions ("units"), in this order:

1. `notes`: every markdown note is first written to a temp file beside it (nothing visible yet);
2. `database`: one transaction of the database the stores share (`StoreSet.batch()`): embedded,
   the SQLite database holding KV, JSON, working memory, blobs, the event log, episodic turns and
   vector documents; PostgreSQL, all of those and the knowledge graph. Collection settings files
   this import creates are removed again when it rolls back;
3. `graph` (embedded only): the LadybugDB graph loads in its own transaction, run inside the
   database's and committed just before it;

then the database commits, then the notes are renamed into place (all, or none: a failed rename
puts back the notes already replaced). A failure anywhere before the database's commit leaves every
store as it was. Only a failure of the last steps can split an import: the database's own commit
failing after the graph committed, or the notes' renames failing after the database committed;
the error then says which units committed and which were rolled back.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

from attrs import define

from ..errors import ContextAssemblyError, InvalidParamsError
from .importer import ImportPlan
from .interfaces import StagedWrites
from .kuzu.graph import load_graph_entries
from .memory import MemoryRouter
from .uri import parse_uri
from .vector import settings_path

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
    new_settings = _missing_settings(memory, plan)
    database_done = False
    try:
        if plan.notes:
            run.enter("markdown", None)
            staged = memory.notes.stage(plan.notes)
        run.at = ("database", None)  # opening it (an unreachable server fails here)
        with memory.stores.batch() if "database" in run.units else contextlib.nullcontext():
            _write_database(run)
            run.at = ("database", None)  # the commit
        database_done = True
        run.settle(_WRITING, COMMITTED)
        run.settle(PARTLY, COMMITTED)
        if staged is not None:
            run.at = ("notes", None)
            run.written["markdown"] = staged.commit()
            run.settle(_WRITING, COMMITTED, notes=True)
    except BaseException as exc:
        if staged is not None:
            staged.discard()
        if not database_done:
            _remove(new_settings)
            run.settle(_WRITING, ROLLED_BACK)
        run.settle(_WRITING, ROLLED_BACK if database_done else NOT_WRITTEN, notes=True)
        if isinstance(exc, ContextAssemblyError):
            raise _failure(run, exc) from exc
        raise
    return _report(run)


def _write_database(run: _Run) -> None:
    """Everything but the notes, inside the database's batch (the graph last, in its own transaction)."""
    memory, plan = run.memory, run.plan
    for name, model in plan.collections.items():
        run.enter("vector", "/collections/" + name)
        assert memory.vectors is not None  # checked by the plan
        memory.vectors.settings(name, model)
    for pointer, uri, value in plan.writes:
        scheme = uri.split("://", 1)[0]
        unit = run.enter(scheme, pointer)
        memory.write(uri, value)
        run.written[scheme] += 1
        if unit.name != "database":
            unit.state = PARTLY  # a store outside the database writes as it goes
    for thread_id, turns in plan.threads.items():
        run.enter("episodic", "/threads/" + _escape(thread_id))
        memory.delete(f"episodic://{thread_id}")
        for turn in turns:
            memory.write(f"episodic://{thread_id}", turn)
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
            memory.write(f"log://{instance}", event)
            run.written["log"] += 1


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _missing_settings(memory: MemoryRouter, plan: ImportPlan) -> list[Path]:
    """The settings files of the collections this import may create (they go again on a rollback)."""
    if memory.vectors is None:
        return []
    names = set(plan.collections)
    names |= {parse_uri(uri).parts[0] for _pointer, uri, _value in plan.writes if uri.startswith("vector://")}
    paths = [settings_path(memory.layout.vectordb_dir, name) for name in sorted(names)]
    return [path for path in paths if not path.exists()]


def _remove(settings_files: list[Path]) -> None:
    for path in settings_files:
        with contextlib.suppress(OSError):
            path.unlink()
            path.parent.rmdir()


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

"""Replaying a stored assembly (seed 003): the snapshot's request run again against today's
definitions and stores, and what drifted since.

Snapshots are `.codebolt/memory/context/{assembly_id}.json` holding `{request, result, read}`
(written when settings enable `snapshots`; `read`: the caller's read patterns, null when
unrestricted). A replay is never itself kept as a snapshot.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..errors import ForbiddenError, InvalidParamsError
from ..model.context import AssembledContext
from ..model.converter import unstructure
from ..pipelines.items import Readable, may_read_item
from ..stores.confine import resolve_inside
from ..stores.uri import render
from ..workspace.layout import WorkspaceLayout
from ..workspace.places import CODEBOLT
from ..workspace.repository import is_safe_id
from .diff import diff

Assemble = Callable[[dict[str, Any]], AssembledContext]


def snapshot_parts(document: Any, where: str = "/snapshot") -> tuple[dict[str, Any], dict[str, Any]]:
    """(request, result) of a snapshot document; InvalidParams when it is not one."""
    if not isinstance(document, dict) or not isinstance(document.get("request"), dict) \
            or not isinstance(document.get("result"), dict):
        message = "not an assembly snapshot: expected an object with `request` and `result`"
        raise InvalidParamsError(message, [{"path": where, "message": message}])
    return document["request"], document["result"]


OWN_SOURCES = "assembly://"  # the assembler's own items (task, warnings, the request's tools): no store read


def visible(result: dict[str, Any], readable: Readable | None) -> dict[str, Any]:
    """An assembled context (JSON) as a caller may see it: the items, trace decisions and ladder
    steps whose store source its token may not read are left out (a stored snapshot may have been
    assembled for another token)."""
    if readable is None:
        return result

    def shown(entry: Any) -> bool:
        if not isinstance(entry, dict):
            return False
        source = entry.get("source")
        if source is None or (isinstance(source, str) and source.startswith(OWN_SOURCES)):
            return True
        return isinstance(source, str) and may_read_item(readable, source, entry.get("metadata"))

    out = dict(result)
    context = result.get("context")
    if isinstance(context, dict):
        out["context"] = {name: [i for i in items if shown(i)] if isinstance(items, list) else items
                          for name, items in context.items()}
    trace = result.get("trace")
    if isinstance(trace, dict):
        out["trace"] = {**trace, **{key: [e for e in trace[key] if shown(e)] for key in ("decisions", "ladder")
                                    if isinstance(trace.get(key), list)}}
    return out


def replay(document: Any, assemble: Assemble, where: str = "/snapshot",
           readable: Readable | None = None) -> dict[str, Any]:
    """`{request, before, after, drift}`: the stored result, today's, and the diff between them
    (both as `readable` lets the caller see them)."""
    request, before = snapshot_parts(document, where)
    before = visible(checked(before, where + "/result"), readable)
    after = visible(unstructure(assemble(request)), readable)
    drift = diff(before, after)
    return {"request": request, "before": before, "after": after, "drift": drift, "drifted": not drift["identical"]}


def _refuse(message: str, where: str) -> InvalidParamsError:
    return InvalidParamsError(message, [{"path": where, "message": message}])


def read_json_inside(root: Path, relative: Any, where: str, what: str = "file") -> Any:
    """A JSON file named relative to the workspace root (never outside it; one under `.codebolt/`
    never outside that folder, wherever a link puts it)."""
    base, rest = root, relative
    if isinstance(relative, str) and relative.startswith(CODEBOLT + "/"):
        base, rest = root / CODEBOLT, relative[len(CODEBOLT) + 1:]
    path = resolve_inside(base, rest, what=what, pointer=where)
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise _refuse(f"no such {what}: {relative}", where) from None
    except OSError as exc:
        raise _refuse(f"cannot read {relative}: {exc.strerror}", where) from None
    except orjson.JSONDecodeError as exc:
        raise _refuse(f"{relative} is not valid JSON: {exc}", where) from None


def snapshot_relpath(reference: str) -> str:
    """An assembly id names `.codebolt/memory/context/{id}.json`; anything else is a path relative
    to the workspace root."""
    if is_safe_id(reference) and not reference.endswith(".json"):
        layout = WorkspaceLayout(Path("."))
        return (layout.snapshots_dir / f"{reference}.json").as_posix()
    return reference


def read_snapshot(root: Path, reference: Any, where: str = "/snapshot", readable: Readable | None = None) -> Any:
    """`readable` (a restricted caller's): a path outside the snapshots folder must be a file it may
    read as `file://<path>`, refused before anything is read (neither its content, nor its keys in an
    error, nor whether it exists reach a caller who may not read it)."""
    if not isinstance(reference, str) or not reference:
        raise _refuse("a snapshot is named by its assembly_id or a path", where)
    relpath = snapshot_relpath(reference)
    if readable is None or readable(render("file", (relpath,))):
        return read_json_inside(root, relpath, where, "snapshot")
    if not _in_snapshots(relpath):
        raise ForbiddenError(f"may not read {relpath}: name a snapshot by its assembly id, or a file this token "
                             "may read", {"path": where})
    document = read_json_inside(root, relpath, where, "snapshot")
    made = document.get("read") if isinstance(document, dict) else None
    if not (isinstance(made, list) and set(made) <= set(readable.patterns)):
        # assembled for a caller who may read more: its counts, warnings and step traces would tell
        # this one what it may not read (older snapshots, which do not say, count as unrestricted)
        raise ForbiddenError(f"snapshot {reference} was assembled for a token that may read more than this one",
                             {"path": where})
    return document


def _in_snapshots(relpath: str) -> bool:
    folder = WorkspaceLayout(Path(".")).snapshots_dir.as_posix() + "/"
    normal = posixpath.normpath(relpath)
    return normal.startswith(folder) and "/" not in normal[len(folder):]


def resolve_side(value: Any, root: Path, assemble: Assemble, where: str,
                 readable: Readable | None = None) -> dict[str, Any]:
    """One side of a diff as an assembled context (JSON): a snapshot (named, or the document),
    an assembled context, or a request (assembled now); as `readable` lets the caller see it."""
    if isinstance(value, str):
        value = read_snapshot(root, value, where, readable)
    if not isinstance(value, dict):
        raise _refuse("expected a snapshot (assembly_id, path or document), an assembled context or a request", where)
    if isinstance(value.get("result"), dict) and "request" in value:
        return visible(checked(dict(value["result"]), where + "/result"), readable)
    if "context" in value and "trace" in value:
        return visible(checked(value, where), readable)
    return visible(unstructure(assemble(value)), readable)


def checked(result: dict[str, Any], where: str) -> dict[str, Any]:
    """An assembled context given as JSON, in the published shape (a score that is a word, an item
    that is a string: the page and the diff failed on them as internal errors); InvalidParams else."""
    from ..schemas import validation_errors

    errors = validation_errors("assembled-context", result)
    if errors:
        raise InvalidParamsError(f"not an assembled context: {errors[0]['path'] or '/'}: {errors[0]['message']}",
                                 [{"path": where + e["path"], "message": e["message"]} for e in errors])
    return result

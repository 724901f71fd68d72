"""`contextAssembly/replay` and `contextAssembly/diff` (seed 003: replay an assembly and see what
was included, dropped and why)."""

from __future__ import annotations

from typing import Any

from ..assembly.replay import read_snapshot, resolve_side
from ..assembly.replay import replay as replay_snapshot
from ..errors import InvalidParamsError
from ..model.context import AssembledContext
from .call import CallContext, MethodSpec
from .params import prefixed, shape
from .session import Session


def _assemble(session: Session, where: str, ctx: CallContext) -> Any:
    def assemble(request: dict[str, Any]) -> AssembledContext:
        try:  # with the client's model too, as `assemble` summarises: otherwise every replay drifts
            return session.assemble(request, snapshot=False, llm=ctx.llm)
        except InvalidParamsError as exc:  # point at the request inside these params
            raise InvalidParamsError(exc.message, prefixed(exc.errors, where)) from None
    return assemble


def replay(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """`{snapshot: assembly_id | path | snapshot document}` -> `{request, before, after, drift, drifted}`."""
    snapshot = params["snapshot"]
    document = read_snapshot(session.root, snapshot, readable=session.access.readable()) \
        if isinstance(snapshot, str) else snapshot
    return replay_snapshot(document, _assemble(session, "/snapshot/request", ctx), readable=session.access.readable())


def diff(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """`{a, b}`, each a snapshot (assembly_id, path or document), an assembled context or a request."""
    from ..assembly.diff import diff as compare

    readable = session.access.readable()
    before = resolve_side(params["a"], session.root, _assemble(session, "/a", ctx), "/a", readable)
    after = resolve_side(params["b"], session.root, _assemble(session, "/b", ctx), "/b", readable)
    return compare(before, after)


def trace_page(session: Session, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """`{request}` (assembled now), `{result}` (an assembled context) or `{snapshot}` -> `{assembly_id, html}`:
    the trace page an editor shows in a web view."""
    from ..model.converter import unstructure
    from ..trace_page import assembly_page

    given = [key for key in ("request", "result", "snapshot") if params.get(key) is not None]
    if len(given) != 1:
        message = "give exactly one of request, result or snapshot"
        raise InvalidParamsError(message, [{"path": "", "message": message}])
    if given[0] == "request":
        result = unstructure(_assemble(session, "/request", ctx)(params["request"]))
    else:
        result = resolve_side(params[given[0]], session.root, _assemble(session, "/" + given[0], ctx), "/" + given[0],
                              session.access.readable())
    meta = result.get("meta") if isinstance(result.get("meta"), dict) else {}
    return {"assembly_id": meta.get("assembly_id"), "html": assembly_page(result)}


METHODS = (
    MethodSpec("contextAssembly/replay", replay, shape(snapshot="any"),
               summary="Re-run a stored assembly against today's definitions and stores; report the drift."),
    MethodSpec("contextAssembly/diff", diff, shape(a="any", b="any"),
               summary="Compare two assemblies (snapshots or requests): items added, removed, moved, re-ranked; "
                       "tokens per section."),
    MethodSpec("contextAssembly/tracePage", trace_page, shape(request="object?", result="object?", snapshot="any?"),
               summary="The trace page (one self-contained HTML document) of an assembly, for an editor's web view."),
)

"""The ingestion processors (SPEC §7): one function per type in `registry.ingestion.PROCESSORS`.

Each takes the value it reads, its parameters (defaults filled, `${variable}` templates resolved)
and the execution's `ProcessorContext`, and returns its output. `ProcessorError` fails the
processor (and the execution); `ProcessorSkipped` skips it with a warning (an LLM step without a
client that runs models).

Decisions the SPEC leaves open:
- `vector_embed` does not compute vectors itself: the vector store embeds on write, with the
  destination collection's model, so a collection never mixes models. It shapes each element into
  `{text, metadata, embed: true}` (metadata: the element's own fields plus `pipeline_id`,
  `execution_id`, `trigger`). With a `collection` parameter it also writes the documents there
  itself (seed 002: "embeds each chunk and writes the embeddings"); documents are named by their
  content, so a route to the same collection rewrites rather than duplicates them. `model` applies
  only with `collection`: a new collection is created with it, an existing one must already use it.
- `blob_store` stores bytes as they are, `{"base64": …}` decoded, a string as UTF-8 text, and
  anything else as its JSON; the key defaults to the content's SHA-256, so storing the same data
  twice keeps one blob. A list stores each element.
- `custom` callables are looked up in the engine's `custom` mapping first, then among the installed
  entry points of group `context_assembly.processors` (by name, or by `module:attr` value). A name
  in a pipeline file never imports arbitrary code. They are called as
  `fn(value, config, context)` where `context` is a dict describing the execution.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import importlib.metadata
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema
import orjson
import re2
import yaml
from attrs import define, field

from ..errors import ContextAssemblyError
from ..registry.values import MISSING, whole_number
from ..stores.chunking import chunk_text
from ..stores.confine import check_key
from ..stores.uri import render
from .templates import TemplateError, TemplateVariables, fill_key, safe_value, walk

ENTRY_POINT_GROUP = "context_assembly.processors"
LLM = Callable[[dict[str, Any]], dict[str, Any]]
ProcessorFn = Callable[[Any, dict[str, Any], "ProcessorContext"], Any]
MAX_DEPTH = 64  # recursion bound for normalising nested payloads


class ProcessorError(Exception):
    """The processor failed; the execution stops."""


class ProcessorSkipped(Exception):
    """The processor did not run (a warning, not a failure)."""


class LLMUnavailable(Exception):
    """Raised by an `llm` callable when the connected client cannot run a model: the step is skipped."""


@define
class ProcessorContext:
    pipeline_id: str
    execution_id: str
    trigger: str
    memory: Any
    variables: TemplateVariables
    llm: LLM | None = None
    custom: Mapping[str, Callable[..., Any]] = field(factory=dict)
    warnings: list[str] = field(factory=list)

    @property
    def provenance(self) -> dict[str, Any]:
        return {"pipeline_id": self.pipeline_id, "execution_id": self.execution_id, "trigger": self.trigger}


# -- shared shapes


def as_text(value: Any, what: str = "input") -> str:
    """The text of a value: a string, an object's `text` / `content`, or the JSON of anything else."""
    if value is MISSING or value is None:
        raise ProcessorError(f"the {what} is absent")
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("text", "content"):
            if isinstance(value.get(key), str):
                return str(value[key])
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def elements(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def content_name(text: str) -> str:
    """A vector document's name from its text: writing the same text again replaces it."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def vector_document(element: Any, provenance: Mapping[str, Any]) -> dict[str, Any]:
    """`{text, metadata}` for a vector write: the element's other scalar fields become metadata."""
    text = as_text(element, "element")
    metadata: dict[str, Any] = {}
    if isinstance(element, Mapping):
        own = element.get("metadata")
        if isinstance(own, Mapping):
            metadata.update(own)
        for key, value in element.items():
            if key not in ("text", "content", "metadata", "embed", "uri") and (
                    value is None or isinstance(value, str | int | float | bool)):
                metadata.setdefault(key, value)
    for key, value in provenance.items():
        metadata.setdefault(key, value)
    return {"text": text, "metadata": metadata}


# -- chunker


def chunker(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> list[dict[str, Any]]:
    # whole numbers as the schema counts them: `200.0` is 200, as validation accepted it
    size, overlap = whole_number(params["chunk_size"]), whole_number(params["overlap"])
    if size is None or size < 1:
        raise ProcessorError(f"chunk_size must be a positive integer (got {params['chunk_size']!r})")
    if overlap is None or not 0 <= overlap < size:
        raise ProcessorError(f"overlap must be an integer from 0 to chunk_size - 1 (got {params['overlap']!r})")
    if value is MISSING or value is None:
        raise ProcessorError("the input is absent")
    sources = value if isinstance(value, list) else [value]
    chunks: list[dict[str, Any]] = []
    for number, source in enumerate(sources):
        extra: dict[str, Any] = {}
        if isinstance(value, list):
            extra["source"] = number
            if isinstance(source, Mapping):  # a parsed section keeps its heading and the like
                extra.update({k: v for k, v in source.items() if k not in ("text", "content", "index", "source")
                              and (v is None or isinstance(v, str | int | float | bool))})
        for piece in chunk_text(as_text(source), size, overlap):
            chunks.append({"text": piece.text, "index": len(chunks), **extra})
    return chunks


# -- normalizer

_SPACES = re.compile(r"[^\S\n]+")
_AROUND_NEWLINE = re.compile(r" ?\n ?")
_BLANK_LINES = re.compile(r"\n{3,}")
# RE2: linear time whatever the payload. Order matters: an address or a card number is not a phone.
_EMAIL = re2.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_IPV4 = re2.compile(r"\b(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}"
                    r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\b")
_CARD = re2.compile(r"\b(?:[0-9][ \-]?){12,18}[0-9]\b")
_PHONE = re2.compile(r"(?:\+|\(|\b[0-9])[0-9 ().\-]{6,}[0-9]\b")


def _luhn(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        n = int(char) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _card(match: Any) -> str:
    text = match.group(0)
    return "[redacted-card]" if _luhn("".join(c for c in text if c.isdigit())) else text


def _phone(match: Any) -> str:
    # A phone number is written with '+', parentheses or separators and has 10-15 digits (8+ after '+'):
    # bare numbers (timestamps, ids) and dates stay.
    text = match.group(0)
    digits = sum(c.isdigit() for c in text)
    international = text.startswith("+") and 8 <= digits <= 15
    written = any(c in text for c in " ().-") and 10 <= digits <= 15
    return "[redacted-phone]" if international or written else text


def redact_pii(text: str) -> str:
    """Emails, IPv4 addresses, card numbers (Luhn-valid) and phone numbers become `[redacted-…]`."""
    text = _EMAIL.sub("[redacted-email]", text)
    text = _IPV4.sub("[redacted-ip]", text)
    text = _CARD.sub(_card, text)
    return str(_PHONE.sub(_phone, text))


def _whitespace(text: str) -> str:
    # Runs of spaces and tabs become one space; line structure stays (a later chunker splits on it),
    # with at most one blank line in a row.
    text = _AROUND_NEWLINE.sub("\n", _SPACES.sub(" ", text.replace("\r\n", "\n").replace("\r", "\n")))
    return _BLANK_LINES.sub("\n\n", text)


_TEXT_OPERATIONS: dict[str, Callable[[str], str]] = {
    "trim": str.strip, "whitespace": _whitespace, "lowercase": str.lower, "redact_pii": redact_pii,
}


def _normalise(value: Any, operation: str, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise ProcessorError(f"the input is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        text_operation = _TEXT_OPERATIONS.get(operation)
        return text_operation(value) if text_operation else value
    if isinstance(value, list):
        kept = [v for v in value if not (operation == "remove_nulls" and v is None)]
        return [_normalise(v, operation, depth + 1) for v in kept]
    if isinstance(value, dict):
        kept_items = [(k, v) for k, v in value.items() if not (operation == "remove_nulls" and v is None)]
        return {k: _normalise(v, operation, depth + 1) for k, v in kept_items}
    return value


def normalizer(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> Any:
    if value is MISSING:
        raise ProcessorError("the input is absent")
    operations = params["operations"]
    if not isinstance(operations, list) or not all(isinstance(op, str) for op in operations):
        raise ProcessorError("operations must be an array of names")
    for operation in operations:
        if operation not in (*_TEXT_OPERATIONS, "remove_nulls"):
            raise ProcessorError(f"unknown normalizer operation {operation!r}")
        value = _normalise(value, operation)
    return value


# -- parser

_HEADING = re.compile(r"(#{1,6})[ \t]+(.*)")
_POINTER_ESCAPES = (("~1", "/"), ("~0", "~"))


def _markdown_sections(text: str) -> list[dict[str, Any]]:
    """Sections split at ATX headings outside code fences: `{heading, level, text}`."""
    sections: list[dict[str, Any]] = []
    heading: str | None = None
    level = 0
    lines: list[str] = []
    fence: str | None = None

    def close() -> None:
        body = "\n".join(lines).strip()
        if heading is not None or body:
            sections.append({"heading": heading, "level": level, "text": body})

    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = None if fence == marker else (fence or marker)
        match = _HEADING.fullmatch(line) if fence is None else None
        if match:
            close()
            heading, level, lines = _heading_text(match.group(2)), len(match.group(1)), []
        else:
            lines.append(line)
    close()
    return sections


def _heading_text(text: str) -> str:
    # A closing run of '#' goes when a space precedes it (CommonMark), so "C#" stays "C#".
    text = text.rstrip(" \t")
    bare = text.rstrip("#")
    if bare != text and (not bare or bare[-1] in " \t"):
        text = bare.rstrip(" \t")
    return text


def _unfence(text: str) -> tuple[str | None, str] | None:
    """(language, body) of a text that is one fenced code block, else None."""
    lines = text.strip().split("\n")
    marker = lines[0][:3]
    if len(lines) < 2 or marker not in ("```", "~~~") or lines[-1].strip() != marker:
        return None
    info = lines[0][3:].strip().split()
    return (info[0] if info else None), "\n".join(lines[1:-1])


def _code(value: Any) -> dict[str, Any]:
    language: str | None = None
    if isinstance(value, Mapping) and isinstance(value.get("code", value.get("text")), str):
        text = str(value.get("code", value.get("text")))
        language = value.get("language") if isinstance(value.get("language"), str) else None
    else:
        text = as_text(value)
    fenced = _unfence(text)
    if fenced:
        language = language or fenced[0]
        text = fenced[1]
    record: dict[str, Any] = {"text": text, "lines": len(text.splitlines())}
    if language:
        record = {"language": language, **record}
    return record


def _select(document: Any, path: str) -> Any:
    """A JSON pointer (`/files/0`) or a dotted path (`files.0`) into a parsed document."""
    if path.startswith("/"):
        parts = path[1:].split("/")
        for old, new in _POINTER_ESCAPES:
            parts = [p.replace(old, new) for p in parts]
    else:
        parts = path.split(".")
    found = walk(document, parts)
    if found is MISSING:
        raise ProcessorError(f"the parsed document has nothing at {path!r}")
    return found


def parser(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> Any:
    kind = params["format"]
    if value is MISSING or value is None:
        raise ProcessorError("the input is absent")
    try:
        if kind == "json":
            parsed = orjson.loads(value) if isinstance(value, str | bytes) else value
        elif kind == "yaml":
            parsed = yaml.safe_load(value) if isinstance(value, str | bytes) else value
        elif kind == "markdown":
            parsed = _markdown_sections(as_text(value))
        elif kind == "code":
            parsed = _code(value)
        else:
            raise ProcessorError(f"unknown parser format {kind!r} (json, yaml, markdown or code)")
    except orjson.JSONDecodeError as exc:
        raise ProcessorError(f"the input is not valid JSON: {exc}") from None
    except yaml.YAMLError as exc:
        raise ProcessorError(f"the input is not valid YAML: {exc}".splitlines()[0]) from None
    path = params.get("path")
    return _select(parsed, path) if isinstance(path, str) and path not in ("", "/") else parsed


# -- vector_embed


def vector_embed(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> list[dict[str, Any]]:
    if value is MISSING or value is None:
        raise ProcessorError("the input is absent")
    documents = [{**vector_document(e, ctx.provenance), "embed": True} for e in elements(value)]
    collection, model = params.get("collection"), params.get("model")
    if collection is not None:
        try:  # it may come from a ${variable}: it names one collection, never a path into another
            collection = safe_value("collection", collection)
        except TemplateError as exc:
            raise ProcessorError(exc.message) from None
    if collection is None:
        if model is not None:
            ctx.warnings.append("'model' applies only with 'collection': the destination collection's model "
                                "embeds these documents")
        return documents
    if model is not None:
        if ctx.memory.vectors is None:
            raise ProcessorError("the vector store is not configured")
        settings = ctx.memory.vectors.settings(collection, model)
        if settings.embedding_model != model:
            raise ProcessorError(f"collection {collection!r} is embedded with {settings.embedding_model!r}, "
                                 f"not {model!r}")
    written: list[str] = []
    for document in documents:
        uri = render("vector", (collection, content_name(document["text"])))
        _write_saying_what(ctx, uri, {"text": document["text"], "metadata": document["metadata"]}, written)
        document["uri"] = uri
    return documents


# -- llm_extract, llm_extract_kb

EXTRACT_SYSTEM = ("You extract structured data from the text you are given. Answer with JSON only: "
                  "no prose, no code fences.")
KB_SYSTEM = ("You extract a knowledge graph from the text you are given. Answer with JSON only: "
             '{"nodes": [{"id", "kind", "name", "attributes"}], "edges": [{"id", "kind", "from", "to", '
             '"attributes"}]}, where from and to are node ids.')


def _ask(ctx: ProcessorContext, request: dict[str, Any]) -> dict[str, Any]:
    if ctx.llm is None:
        raise ProcessorSkipped("no connected client runs models (llm/complete): the step was skipped")
    try:
        answer = ctx.llm(request)
    except LLMUnavailable as exc:
        raise ProcessorSkipped(f"the client cannot run models: {exc}" if str(exc) else
                               "the client cannot run models: the step was skipped") from None
    except ContextAssemblyError as exc:
        raise ProcessorError(f"the model call failed: {exc.message}") from None
    except Exception as exc:
        raise ProcessorError(f"the model call failed: {exc}") from None
    if not isinstance(answer, Mapping):
        raise ProcessorError(f"the model's answer is not an object (got {type(answer).__name__})")
    return dict(answer)


def _answer_json(answer: Mapping[str, Any]) -> Any:
    text = answer.get("text")
    if not isinstance(text, str):
        raise ProcessorError("the model's answer has no 'text'")
    fenced = _unfence(text)  # models often wrap JSON in a code fence despite being asked not to
    try:
        return orjson.loads(fenced[1] if fenced else text)
    except orjson.JSONDecodeError as exc:
        raise ProcessorError(f"the model's answer is not JSON: {exc}") from None


def _prompt(instructions: str, value: Any) -> str:
    return f"{instructions}\n\n---\n{as_text(value)}"


def llm_extract(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> Any:
    schema = params.get("output_schema")
    instructions = params.get("instructions") or "Extract the facts, decisions and entities as JSON records."
    answer = _ask(ctx, {"prompt": _prompt(instructions, value), "system": EXTRACT_SYSTEM,
                        "schema": schema if isinstance(schema, dict) else {"type": ["array", "object"]}})
    extracted = _answer_json(answer)
    if isinstance(schema, dict):
        try:
            jsonschema.validate(extracted, schema)
        except jsonschema.ValidationError as exc:
            raise ProcessorError(f"the extracted value does not match output_schema: {exc.message}") from None
        except jsonschema.SchemaError as exc:
            raise ProcessorError(f"output_schema is not a valid JSON Schema: {exc.message}") from None
    return extracted


def _kb_schema(node_kinds: list[str] | None, edge_kinds: list[str] | None) -> dict[str, Any]:
    def kind(kinds: list[str] | None) -> dict[str, Any]:
        return {"enum": kinds} if kinds else {"type": "string"}

    node = {"type": "object", "required": ["id", "kind"], "properties": {
        "id": {"type": "string"}, "kind": kind(node_kinds), "name": {"type": "string"},
        "attributes": {"type": "object"}}}
    edge = {"type": "object", "required": ["kind", "from", "to"], "properties": {
        "id": {"type": "string"}, "kind": kind(edge_kinds), "from": {"type": "string"}, "to": {"type": "string"},
        "attributes": {"type": "object"}}}
    return {"type": "object", "required": ["nodes", "edges"], "properties": {
        "nodes": {"type": "array", "items": node}, "edges": {"type": "array", "items": edge}}}


def _graph_entry(raw: Any, where: str, required: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ProcessorError(f"{where} is not an object")
    for name in required:
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise ProcessorError(f"{where} needs a non-empty string '{name}'")
        try:
            check_key(raw[name], what=name)
        except ContextAssemblyError as exc:
            raise ProcessorError(f"{where}: {exc.message}") from None
    attributes = raw.get("attributes")
    if attributes is not None and not isinstance(attributes, Mapping):
        raise ProcessorError(f"{where}: attributes must be an object")
    return {**raw, "attributes": dict(attributes or {})}


def llm_extract_kb(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> dict[str, Any]:
    node_kinds, edge_kinds = params.get("node_kinds"), params.get("edge_kinds")
    instructions = params.get("instructions") or "Extract the entities and the relations between them."
    if node_kinds:
        instructions += f"\nNode kinds: {', '.join(node_kinds)}."
    if edge_kinds:
        instructions += f"\nEdge kinds: {', '.join(edge_kinds)}."
    answer = _ask(ctx, {"prompt": _prompt(instructions, value), "system": KB_SYSTEM,
                        "schema": _kb_schema(node_kinds, edge_kinds)})
    graph = answer if isinstance(answer.get("nodes"), list) else _answer_json(answer)
    if not isinstance(graph, Mapping) or not isinstance(graph.get("nodes"), list) \
            or not isinstance(graph.get("edges", []), list):
        raise ProcessorError("the model's answer is not {nodes: [...], edges: [...]}")
    nodes = []
    for i, raw in enumerate(graph["nodes"]):
        node = _graph_entry(raw, f"node {i}", ("id", "kind"))
        node.setdefault("name", node["id"])
        nodes.append(node)
    edges = []
    for i, raw in enumerate(graph.get("edges", [])):
        edge = _graph_entry(raw, f"edge {i}", ("kind", "from", "to"))
        edge["id"] = edge.get("id") or f"{edge['from']}:{edge['kind']}:{edge['to']}"
        edges.append(edge)
    kept_nodes = [n for n in nodes if not node_kinds or n["kind"] in node_kinds]
    kept_edges = [e for e in edges if not edge_kinds or e["kind"] in edge_kinds]
    dropped = len(nodes) - len(kept_nodes) + len(edges) - len(kept_edges)
    if dropped:
        ctx.warnings.append(f"{dropped} node(s)/edge(s) of kinds not in node_kinds/edge_kinds were dropped")
    return {"nodes": kept_nodes, "edges": kept_edges}


# -- blob_store


def _blob_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, Mapping) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(str(value["base64"]), validate=True)
        except (binascii.Error, ValueError):
            raise ProcessorError("'base64' is not valid base64") from None
    if isinstance(value, Mapping) and isinstance(value.get("text"), str):
        return str(value["text"]).encode("utf-8", "surrogatepass")
    return orjson.dumps(value, default=str)


def blob_store(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> Any:
    if value is MISSING or value is None:
        raise ProcessorError("the input is absent")
    try:
        bucket = safe_value("bucket", params["bucket"])
    except TemplateError as exc:
        raise ProcessorError(exc.message) from None
    # every key first: a refused one stores nothing (it left the elements before it stored, unreported)
    planned = []
    for index, element in enumerate(elements(value)):
        data = _blob_bytes(element)
        digest = hashlib.sha256(data).hexdigest()
        template = params.get("key")
        try:
            key = fill_key(template, ctx.variables.with_item(element, index)) if template else digest
        except TemplateError as exc:
            raise ProcessorError(f"key of element {index}: {exc.message} (nothing was stored)") from None
        uri = render("blob", (bucket, key))
        planned.append((uri, data, {"uri": uri, "bucket": bucket, "key": key, "size": len(data), "sha256": digest}))
    written: list[str] = []
    for uri, data, _entry in planned:
        _write_saying_what(ctx, uri, base64.b64encode(data).decode("ascii"), written)
    stored = [entry for _uri, _data, entry in planned]
    return stored if isinstance(value, list) else stored[0]


def _write_saying_what(ctx: ProcessorContext, uri: str, value: Any, written: list[str]) -> None:
    """One of a processor's writes; when it fails, the error says what the ones before stored."""
    try:
        ctx.memory.write(uri, value)
    except ContextAssemblyError as exc:
        done = f"{len(written)} stored before it: {', '.join(written)}" if written else "nothing was stored"
        raise ProcessorError(f"{uri}: {exc.message} ({done})") from None
    written.append(uri)


# -- custom


def find_custom(name: str, registered: Mapping[str, Callable[..., Any]]) -> Callable[..., Any]:
    if name in registered:
        return registered[name]
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if name in (entry.name, entry.value):
            try:
                loaded = entry.load()
            except Exception as exc:
                raise ProcessorError(f"entry point {name!r} cannot be loaded: {exc}") from None
            if not callable(loaded):
                raise ProcessorError(f"entry point {name!r} is not callable")
            return loaded
    raise ProcessorError(f"no custom processor {name!r}: register a callable under the entry point group "
                         f"{ENTRY_POINT_GROUP!r} or pass it to the engine")


def custom(value: Any, params: dict[str, Any], ctx: ProcessorContext) -> Any:
    fn = find_custom(params["entry_point"], ctx.custom)
    variables = ctx.variables
    context = {**ctx.provenance, "payload": variables.payload, "outputs": dict(variables.outputs),
               "scope_variables": dict(variables.scope_variables),
               "additional_variables": dict(variables.additional_variables)}
    try:
        return fn(None if value is MISSING else value, dict(params.get("config") or {}), context)
    except ProcessorError:
        raise
    except Exception as exc:
        raise ProcessorError(f"{params['entry_point']} failed: {type(exc).__name__}: {exc}") from None


PROCESSOR_FUNCTIONS: dict[str, ProcessorFn] = {
    "chunker": chunker, "normalizer": normalizer, "parser": parser, "vector_embed": vector_embed,
    "llm_extract": llm_extract, "llm_extract_kb": llm_extract_kb, "blob_store": blob_store, "custom": custom,
}


def count_of(output: Any) -> int:
    """How many results a processor produced (for run results and notifications)."""
    if output is MISSING or output is None:
        return 0
    if isinstance(output, list):
        return len(output)
    if isinstance(output, Mapping) and isinstance(output.get("nodes"), list) and isinstance(output.get("edges"), list):
        return len(output["nodes"]) + len(output["edges"])
    return 1


__all__ = ["ENTRY_POINT_GROUP", "LLM", "LLMUnavailable", "PROCESSOR_FUNCTIONS", "ProcessorContext", "ProcessorError",
           "ProcessorFn", "ProcessorSkipped", "as_text", "count_of", "elements", "redact_pii", "vector_document"]

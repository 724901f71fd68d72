"""CRUD over definition files in `.codebolt/` (SPEC §4.1, §5.2, §7, §8).

One definition per file, `{id}.json` (or `{id}.yaml` / `.yml`, written back as YAML). The file is the
source of truth: plain dicts go in and out and keys this code does not know are kept. The file name
is the id; a document read without an `id`, or with another one, is returned with the file's id.
Every read-modify-write runs under the workspace lock of its directory, so concurrent processes
lose no edit, and every write is atomic.
"""

from __future__ import annotations

import copy
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from attrs import define, field

from ..errors import ConflictError, InvalidParamsError, NotFoundError, StorageError
from ..limits import DEFAULT as DEFAULT_LIMITS
from ..limits import Limits, too_large
from ..schemas.fragments import FILE_ID_RULE
from .atomic import DEFAULT_LOCK_TIMEOUT, remove_file, workspace_lock, write_atomic
from .layout import WorkspaceLayout

Document: TypeAlias = dict[str, Any]
Documents: TypeAlias = list[dict[str, Any]]
Problems: TypeAlias = list[dict[str, Any]]
Paths: TypeAlias = list[Path]
Names: TypeAlias = list[str]  # aliases: the `list` method shadows the builtin in class bodies
Validator: TypeAlias = Callable[[Document], Problems]

SUFFIXES = (".json", ".yaml", ".yml")  # lookup order when one id has several files
_YAML_SUFFIXES = (".yaml", ".yml")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# Names Windows reserves whatever the extension: a file `nul.json` cannot be created there.
_DEVICE_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)), *(f"LPT{i}" for i in range(10))}
)


def is_safe_id(value: object) -> bool:
    """True for an id that is one plain file name in every supported OS (the schemas' `id` pattern,
    `schemas.fragments.FILE_ID_PATTERN`, says the same; a test keeps them equal)."""
    return (
        isinstance(value, str)
        and _ID.fullmatch(value) is not None
        and not value.endswith(".")  # Windows drops trailing dots: `a.` would be `a`
        and value.split(".")[0].upper() not in _DEVICE_NAMES
    )


def check_id(value: object, path: str = "/id") -> str:
    if not is_safe_id(value):
        message = f"must be {FILE_ID_RULE}"
        raise InvalidParamsError(f"invalid id {value!r}", [{"path": path, "message": message}])
    assert isinstance(value, str)
    return value


def slugify(text: str, max_length: int = 64) -> str:
    """`"Planning phase rules"` → `"planning-phase-rules"`; empty when nothing usable is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:max_length].rstrip("-")


def unique_name(base: str, taken: Callable[[str], bool]) -> str:
    """`base`, else `base-2`, `base-3`, … whichever is free first."""
    candidate, n = base, 1
    while taken(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


@define
class DefinitionRepository:
    """The definitions of one kind, one file each in `directory`."""

    directory: Path = field(converter=Path)
    kind: str = field(kw_only=True)
    id_prefix: str = field(kw_only=True)
    lock_dir: Path = field(kw_only=True, converter=Path)
    validate: Validator | None = field(default=None, kw_only=True)
    lock_timeout: float = field(default=DEFAULT_LOCK_TIMEOUT, kw_only=True)
    limits: Callable[[], Limits] = field(default=lambda: DEFAULT_LIMITS, kw_only=True)  # the session's, live

    # -- reads: no lock needed, since writes replace whole files

    def list(self) -> Documents:
        """Every definition that parses, sorted by id; broken files are skipped (the loader reports them)."""
        items: Documents = []
        for def_id in self._ids():
            path = self._find(def_id)
            if path is None:
                continue  # deleted meanwhile
            try:
                items.append(_with_id(_parse(path), def_id))
            except (OSError, ValueError):
                continue
        return items

    def get(self, def_id: str) -> Document:
        return self._load(check_id(def_id))[1]

    # -- writes: each one a locked read-modify-write

    def create(self, doc: Document) -> Document:
        """Store a new definition; an `id` is generated when missing. ConflictError when it exists."""
        doc = copy.deepcopy(_require_mapping(doc, ""))
        with self._locked():
            def_id = self._claim_id(doc)
            stored = self._prepare(_with_id(doc, def_id))
            self._write(self.directory / f"{def_id}.json", stored)
        return stored

    def update(self, def_id: str, updates: Document) -> Document:
        """Replace the top-level keys given in `updates`, keep the others (SPEC "Update merges")."""
        check_id(def_id)
        updates = copy.deepcopy(_require_mapping(updates, "/updates"))
        if "id" in updates and updates["id"] != def_id:
            raise _invalid("id cannot change", "/updates/id", f"must be {def_id!r} or absent")
        with self._locked():
            path, current = self._load(def_id)
            stored = self._prepare({**current, **updates})
            self._write(path, stored, before=current)
        return stored

    def delete(self, def_id: str) -> dict[str, Any]:
        check_id(def_id)
        with self._locked():
            removed = [remove_file(path) for path in self._paths(def_id) if path.is_file()]
        if not any(removed):
            raise self._not_found(def_id)
        return {"id": def_id, "deleted": True}

    # -- extension points

    def _prepare(self, doc: Document) -> Document:
        """Complete a document about to be written (a subclass fills in nested ids)."""
        return doc

    # -- internals

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with workspace_lock(self.lock_dir, self.directory.name, timeout=self.lock_timeout):
            yield

    def _paths(self, def_id: str) -> Paths:
        return [self.directory / f"{def_id}{suffix}" for suffix in SUFFIXES]

    def _find(self, def_id: str) -> Path | None:
        return next((path for path in self._paths(def_id) if path.is_file()), None)

    def _ids(self) -> Names:
        try:
            names = [path.name for path in self.directory.iterdir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StorageError(f"cannot list {self.directory}: {exc}") from exc
        stems = {Path(name).stem for name in names if Path(name).suffix in SUFFIXES}
        return sorted(stem for stem in stems if is_safe_id(stem))

    def _load(self, def_id: str) -> tuple[Path, Document]:
        path = self._find(def_id)
        if path is None:
            raise self._not_found(def_id)
        try:
            return path, _with_id(_parse(path), def_id)
        except FileNotFoundError:
            raise self._not_found(def_id) from None
        except (OSError, ValueError) as exc:
            raise StorageError(f"{self.kind} {def_id!r} cannot be read: {exc}", {"path": str(path)}) from exc

    def _claim_id(self, doc: Document) -> str:
        given = doc.get("id")
        if given not in (None, ""):
            def_id = check_id(given)
            if self._find(def_id) is not None:
                raise ConflictError(f"{self.kind} {def_id!r} already exists", {"id": def_id})
            return def_id
        title = doc.get("name") or doc.get("label")
        base = slugify(title) if isinstance(title, str) else ""
        if not is_safe_id(base):  # empty, or a slug such as "nul" that Windows reserves
            base = f"{self.id_prefix}-{uuid.uuid4().hex[:8]}"
        return unique_name(base, lambda candidate: self._find(candidate) is not None)

    def _write(self, path: Path, doc: Document, before: Document | None = None) -> None:
        """`before`: the file's value now: a YAML file then changes only where `doc` differs (its
        comments stay)."""
        limits = self.limits()
        rules = doc.get("rules")
        if isinstance(rules, list) and len(rules) > limits.rules_per_engine:
            raise _invalid(f"too many rules ({len(rules)}; at most {limits.rules_per_engine}, "
                           "limits.rules_per_engine)", "/rules", "too many rules")
        if self.validate is not None and (problems := self.validate(doc)):
            raise InvalidParamsError(f"invalid {self.kind}", problems)
        data = _serialise(doc, yaml_format=path.suffix in _YAML_SUFFIXES, schema=_SCHEMAS.get(self.kind),
                          over=(path, before) if before is not None else None)
        if len(data) > limits.definition_file_bytes:
            message = too_large(f"the {self.kind} file", len(data), limits.definition_file_bytes,
                                "definition_file_bytes")
            raise _invalid(message, "", message)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create {self.directory}: {exc}") from exc
        write_atomic(path, data)

    def _not_found(self, def_id: str) -> NotFoundError:
        return NotFoundError(f"{self.kind} {def_id!r} not found", {"id": def_id})


@define
class RuleEngineRepository(DefinitionRepository):
    """Rule engines (SPEC §4.1): rules get ids too, and can be edited one at a time."""

    def add_rule(self, engine_id: str, rule: Document) -> Document:
        """Append `rule` (id generated when missing); ConflictError if the engine has that rule id."""
        check_id(engine_id, "/engine_id")
        rule = copy.deepcopy(_require_mapping(rule, "/rule"))
        with self._locked():
            path, engine = self._load(engine_id)
            rules = _rules_of(engine)
            rule_id = rule.get("id")
            if isinstance(rule_id, str) and rule_id in _rule_ids(rules):
                raise ConflictError(
                    f"rule {rule_id!r} already exists in {self.kind} {engine_id!r}",
                    {"engine_id": engine_id, "rule_id": rule_id},
                )
            rules.append(rule)
            self._write(path, self._prepare(engine))
        return rules[-1]  # _prepare may have replaced it by a copy carrying the new id

    def update_rule(self, engine_id: str, rule_id: str, updates: Document) -> Document:
        """Merge `updates` into one rule's top-level keys."""
        check_id(engine_id, "/engine_id")
        updates = copy.deepcopy(_require_mapping(updates, "/updates"))
        if "id" in updates and updates["id"] != rule_id:
            raise _invalid("rule id cannot change", "/updates/id", f"must be {rule_id!r} or absent")
        with self._locked():
            path, engine = self._load(engine_id)
            rules = _rules_of(engine)
            index = self._rule_index(rules, engine_id, rule_id)
            rules[index] = merged = {**rules[index], **updates}
            self._write(path, self._prepare(engine))
        return merged

    def delete_rule(self, engine_id: str, rule_id: str) -> dict[str, Any]:
        check_id(engine_id, "/engine_id")
        with self._locked():
            path, engine = self._load(engine_id)
            rules = _rules_of(engine)
            del rules[self._rule_index(rules, engine_id, rule_id)]
            self._write(path, engine)
        return {"engine_id": engine_id, "rule_id": rule_id, "deleted": True}

    def _prepare(self, doc: Document) -> Document:
        rules = doc.get("rules")
        if isinstance(rules, list):
            _assign_rule_ids(rules)
        return doc

    def _rule_index(self, rules: Documents, engine_id: str, rule_id: str) -> int:
        for index, rule in enumerate(rules):
            if isinstance(rule, dict) and rule.get("id") == rule_id:
                return index
        raise NotFoundError(
            f"rule {rule_id!r} not found in {self.kind} {engine_id!r}",
            {"engine_id": engine_id, "rule_id": rule_id},
        )


# kind (as in workspace/loader.KINDS) -> (the kind in messages, the prefix of generated ids)
REPOSITORY_KINDS: dict[str, tuple[str, str]] = {
    "rule-engine": ("rule engine", "engine"),
    "persistent-memory": ("persistent memory", "memory"),
    "ingestion-pipeline": ("ingestion pipeline", "ingestion"),
}


def definition_repository(layout: WorkspaceLayout, kind: str, *, validate: Validator | None = None,
                          lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> DefinitionRepository:
    """The repository of one kind of definition file, in its `.codebolt/` folder."""
    label, id_prefix = REPOSITORY_KINDS[kind]
    cls = RuleEngineRepository if kind == "rule-engine" else DefinitionRepository
    return cls(layout.directory_of(kind), kind=label, id_prefix=id_prefix, lock_dir=layout.locks_dir,
               validate=validate, lock_timeout=lock_timeout)


def rule_engine_repository(layout: WorkspaceLayout, **options: Any) -> RuleEngineRepository:
    repository = definition_repository(layout, "rule-engine", **options)
    assert isinstance(repository, RuleEngineRepository)
    return repository


# -- documents


def _parse(path: Path) -> Document:
    """The file's object; ValueError when it holds none (a YAML error too: PyYAML is imported only
    for a YAML file, so a workspace of JSON files never loads it)."""
    raw = path.read_bytes()
    if path.suffix in _YAML_SUFFIXES:
        import yaml

        try:
            data = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc)) from exc
    else:
        data = orjson.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} does not hold an object")
    return data


# the schema each kind's files follow (kinds are named as their schemas): the formatter's key order
_SCHEMAS = {label: kind for kind, (label, _prefix) in REPOSITORY_KINDS.items()}


def _serialise(doc: Document, *, yaml_format: bool, schema: str | None = None,
               over: tuple[Path, Document] | None = None) -> bytes:
    """The file text, laid out as `context-assembly format` would (so saved files stay formatted);
    `over`: the YAML file written over and its value, whose unchanged keys keep their comments."""
    from ..formatting import FormatError, format_value, update_text

    if yaml_format and over is not None:
        try:
            return update_text(over[0].read_text(encoding="utf-8"), over[1], doc, schema).encode()
        except (OSError, UnicodeDecodeError, TypeError, FormatError):
            pass  # written whole, as a new file is
    try:
        return format_value(doc, schema, yaml=yaml_format).encode()
    except (TypeError, FormatError) as exc:
        raise _invalid("definition cannot be stored", "", str(exc)) from exc


def _with_id(doc: Document, def_id: str) -> Document:
    """`doc` with `id` set, in place when present, else first (after `$schema`)."""
    if "id" in doc:
        return {key: (def_id if key == "id" else value) for key, value in doc.items()}
    head = {"$schema": doc["$schema"]} if "$schema" in doc else {}
    return {**head, "id": def_id, **doc}


def _require_mapping(value: object, path: str) -> Document:
    if not isinstance(value, dict):
        raise _invalid("expected an object", path, "must be an object")
    return value


def _invalid(message: str, path: str, detail: str) -> InvalidParamsError:
    return InvalidParamsError(message, [{"path": path, "message": detail}])


# -- rules


def _rules_of(engine: Document) -> Documents:
    rules = engine.setdefault("rules", [])
    if not isinstance(rules, list):
        raise _invalid("the engine's rules are not a list", "/rules", "must be an array")
    return rules


def _rule_ids(rules: Documents) -> set[str]:
    return {rule["id"] for rule in rules if isinstance(rule, dict) and isinstance(rule.get("id"), str)}


def _assign_rule_ids(rules: Documents) -> None:
    """Give every rule without an id a slug of its name or `rule-<n>`, unique in the engine."""
    taken: set[Any] = set()
    for index, rule in enumerate(rules):
        if not isinstance(rule, dict) or rule.get("id") in (None, ""):
            continue
        if not isinstance(rule["id"], str):
            raise _invalid("invalid rule id", f"/rules/{index}/id", "must be a string")
        if rule["id"] in taken:
            raise _invalid("duplicate rule id", f"/rules/{index}/id", f"{rule['id']!r} is used twice")
        taken.add(rule["id"])
    for index, rule in enumerate(rules):
        if isinstance(rule, dict) and rule.get("id") in (None, ""):
            rule_id = _new_rule_id(rule, index, taken)
            rules[index] = _with_id(rule, rule_id)
            taken.add(rule_id)


def _new_rule_id(rule: Document, index: int, taken: set[Any]) -> str:
    name = rule.get("name")
    base = slugify(name) if isinstance(name, str) else ""
    if base:
        return unique_name(base, taken.__contains__)
    n = index + 1
    while f"rule-{n}" in taken:
        n += 1
    return f"rule-{n}"

"""rule-test: the files under `.codebolt/tests/` that test rules and assemblies (beyond the seeds)."""

from __future__ import annotations

from .fragments import SCHEMA_KEY, Schema, boolean, described, document, enum, fields, integer, obj, ref, string
from .sources import Sources

_REQUEST = {"$ref": "urn:context-assembly:schema:assembly-request"}


def _strings(description: str) -> Schema:
    return described({"type": "array", "items": {"type": "string", "minLength": 1}}, description)


def _item_match(src: Sources) -> Schema:
    return obj("Item match", "An item of the assembled context, matched by what it came from and what it "
               "says (every given key must hold).", {
                   "memory": string("The persistent-memory id (or store URI) that produced it."),
                   "text": string("Text the item's content contains (case-insensitive)."),
                   "section": enum(src.section_names, "The section it is in.", title="Section"),
               }, minProperties=1)


def _expect(src: Sources) -> Schema:
    sections = {"type": "array", "items": enum(src.section_names, "A section.", title="Section")}
    items = {"type": "array", "items": ref("item_match")}
    return obj("Expectations", "What must hold for the case to pass. Memories and rules are checked "
               "after rule evaluation; sections, items and tokens need the full assembly.", {
                   "memories_included": _strings("Memories that must be included: resolved from explicit "
                                                 "memory, @mentions and rules (with assemble: contributing "
                                                 "items to the context)."),
                   "memories_excluded": _strings("Memories that must not be included."),
                   "rules_fired": _strings("Rules that must match: `engine/rule` or just `rule` (any engine)."),
                   "rules_not_fired": _strings("Rules that must not match."),
                   "sections_present": described(sections, "Sections that must hold at least one item."),
                   "sections_absent": described(sections, "Sections that must be empty."),
                   "items_present": described(items, "Items the context must hold."),
                   "items_absent": described(items, "Items the context must not hold."),
                   "max_token_estimate": integer("The assembly's token_estimate must be at most this.", 0),
                   "warnings": _strings("Texts each of which some warning must contain (case-insensitive): "
                                        "rule warnings and unknown references; with assemble, the items of "
                                        "the warnings section."),
                   "no_warnings": boolean("There must be no warning at all."),
               }, minProperties=1)


def _case() -> Schema:
    return obj("Test case", "One request and what must hold for it. The request is the file's `request` "
               "with the case's `request` merged over it (objects key by key), or read from "
               "`request_file`, or taken from a stored assembly (`snapshot`).", {
                   "name": described({"type": "string", "minLength": 1}, "The case's name (unique in the file)."),
                   "description": string("What the case is about."),
                   "request": described({"type": "object"}, "The assembly request, merged over the file's "
                                        "`request`."),
                   "request_file": string("A JSON file holding the request, relative to the workspace root."),
                   "snapshot": string("A stored assembly whose request is used: its assembly_id "
                                      "(.codebolt/memory/context/{id}.json) or a path relative to the "
                                      "workspace root."),
                   "assemble": boolean("Run the full assembly against the stores (default: only when an "
                                       "expectation needs it: sections, items, tokens)."),
                   "skip": boolean("Do not run the case (it is reported as skipped).", False),
                   "expect": ref("expect"),
               }, ["name", "expect"])


def rule_test(src: Sources) -> Schema:
    body = fields({
        "$schema": SCHEMA_KEY,
        "description": string("What these tests cover."),
        "request": described(_REQUEST, "The request every case starts from (cases merge theirs over it)."),
        "cases": described({"type": "array", "items": ref("case"), "minItems": 1}, "The test cases."),
    }, ["cases"])
    return document(
        "rule-test", "Rule tests",
        "A file of tests under .codebolt/tests/: cases of a request and what the rules (or the whole "
        "assembly) must do with it. Run them with `context-assembly test`.",
        {**body, "$defs": {"case": _case(), "expect": _expect(src), "item_match": _item_match(src)}},
    )

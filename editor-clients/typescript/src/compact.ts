/**
 * Expanding a compact answer (`trace_format: "compact"`) into exactly the default answer, as the
 * Python client's `context_assembly.client.compact_trace` does (README of the server, "The compact
 * answer"): per engine the key of a static layout (`contextRuleEngine/traceLayout`), the indexes of
 * the matched rules and (explain all / matched) every distinct condition's outcome as bits; top-level
 * `actual_values` holds each variable's value once.
 *
 * In an expanded answer one engine's identical conditions are one object shared by the rules that
 * hold them, and the conditions reading one variable share its value: copy before changing one.
 * Nothing is shared with the layout cache or with another answer.
 */

import type { CompactEvaluation, EvaluationResult, JsonObject, TraceLayout } from "./types";

/** Top-level keys only a compact answer has. */
const COMPACT_KEYS = new Set(["trace_format", "explain", "actual_values"]);

/** A compact answer that its layout cannot expand: a layout missing from the cache, or an answer or layout that is not well formed. */
export class LayoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LayoutError";
  }
}

type Condition =
  | { kind: "leaf"; absent: JsonObject; present: JsonObject; nullActual: JsonObject; variable: string }
  | { kind: "group"; group: unknown; children: number[] }
  | { kind: "broken"; template: JsonObject };

interface PreparedRule {
  unmatched: JsonObject;
  matched: JsonObject;
  slots: number[];
  /** A value other than a scalar or a list of scalars (copied all the way down then). */
  mutable: boolean;
}

interface Prepared {
  key: string;
  engineId: string;
  conditions: Condition[];
  rules: PreparedRule[];
}

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isIndexList(value: unknown, below: number): value is number[] {
  return Array.isArray(value) && value.every((i) => Number.isInteger(i) && i >= 0 && i < below);
}

const isScalar = (value: unknown): boolean => value === null || typeof value !== "object";

/** A JSON value, fresh: a list of scalars sliced, other lists and objects copied all the way down. */
function fresh<T>(value: T): T {
  if (isScalar(value)) {
    return value;
  }
  return (Array.isArray(value) && value.every(isScalar) ? value.slice() : structuredClone(value)) as T;
}

function prepare(document: unknown): Prepared {
  if (!isObject(document) || !Array.isArray(document.conditions) || !Array.isArray(document.rules)
      || typeof document.layout !== "string" || typeof document.engine_id !== "string") {
    throw new LayoutError("malformed trace layout: layout, engine_id, conditions and rules are required");
  }
  const conditions = document.conditions.map((entry, index) => condition(entry, index));
  const rules = document.rules.map((entry) => rule(entry, conditions.length));
  return { key: document.layout, engineId: document.engine_id, conditions, rules };
}

function condition(entry: unknown, index: number): Condition {
  if (!isObject(entry)) {
    throw new LayoutError(`malformed trace layout: condition ${index} is not an object`);
  }
  if (Object.hasOwn(entry, "group")) {
    if (!isIndexList(entry.conditions, index)) {
      throw new LayoutError(`condition ${index}: a group's conditions must come before it`);
    }
    return { kind: "group", group: entry.group, children: entry.conditions };
  }
  if (!Object.hasOwn(entry, "variable")) {
    return { kind: "broken", template: { result: false, ...entry } };
  }
  const head: JsonObject = { result: false, field: entry.field, operator: entry.operator };
  if (Object.hasOwn(entry, "value")) {
    head.value = entry.value;
  }
  const tail: JsonObject = Object.hasOwn(entry, "ignore_case") ? { ignore_case: entry.ignore_case } : {};
  return {
    kind: "leaf",
    absent: { ...head, present: false, ...tail },
    present: { ...head, actual: null, present: true, ...tail },
    nullActual: { ...head, present: true, ...tail },
    variable: String(entry.variable),
  };
}

function rule(entry: unknown, conditions: number): PreparedRule {
  if (!isObject(entry)) {
    throw new LayoutError("malformed trace layout: a rule is not an object");
  }
  if (!isIndexList(entry.conditions, conditions)) {
    throw new LayoutError(`rule ${JSON.stringify(entry.rule_id)}: condition index out of range`);
  }
  if (!Array.isArray(entry.memories) || !Array.isArray(entry.excluded)) {
    throw new LayoutError(`rule ${JSON.stringify(entry.rule_id)}: memories and excluded must be lists`);
  }
  const unmatched: JsonObject = { rule_id: entry.rule_id, matched: false };
  for (const key of ["name", "priority"]) {
    if (Object.hasOwn(entry, key)) {
      unmatched[key] = entry[key];
    }
  }
  Object.assign(unmatched, { conditions: null, memories: null, excluded: null, per_source: entry.per_source });
  if (Object.hasOwn(entry, "error")) {
    unmatched.error = entry.error;
  }
  const matched = { ...unmatched, matched: true, memories: entry.memories, excluded: entry.excluded };
  const mutable = ![...Object.values(unmatched), ...entry.memories, ...entry.excluded].every(isScalar);
  return { unmatched, matched, slots: entry.conditions, mutable };
}

/** The `count` outcomes of a bitmap (base64; bit i = outcome i, least significant bit first). */
export function unpack(outcomes: unknown, count: number): boolean[] {
  if (typeof outcomes !== "string" || outcomes.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(outcomes)) {
    throw new LayoutError("outcomes: not base64");
  }
  const raw = Buffer.from(outcomes, "base64");
  if (raw.length !== Math.ceil(count / 8)) {
    throw new LayoutError(`outcomes: ${raw.length} bytes for ${count} conditions (a different layout?)`);
  }
  const bits: boolean[] = [];
  for (let i = 0; i < raw.length * 8; i++) {
    const bit = ((raw[i >> 3] >> (i & 7)) & 1) === 1;
    if (i < count) {
      bits.push(bit);
    } else if (bit) {
      throw new LayoutError("outcomes: bits set beyond the last condition");
    }
  }
  return bits;
}

/** The layouts a client has seen, the latest per engine; `expand` turns compact answers into full ones. */
export class TraceLayouts {
  private readonly byEngine = new Map<string, Prepared>();

  /** A layout as `contextRuleEngine/traceLayout` answers it. */
  add(document: TraceLayout): void {
    const prepared = prepare(document);
    this.byEngine.set(prepared.engineId, prepared);
  }

  /** [engine id, layout key] of each layout the answer needs that is not here. */
  missing(answer: CompactEvaluation | EvaluationResult): [string, string][] {
    const wanted = new Map<string, [string, string]>();
    for (const entry of answer.engine_results as unknown as JsonObject[]) {
      const trace = entry.trace;
      if (isObject(trace) && typeof entry.engine_id === "string" && typeof trace.layout === "string") {
        wanted.set(`${entry.engine_id}\u0000${trace.layout}`, [entry.engine_id, trace.layout]);
      }
    }
    return [...wanted.values()].filter(([engineId, key]) => this.byEngine.get(engineId)?.key !== key);
  }

  /** The answer as `"trace_format": "full"` gives it; an answer that is not compact as it is. */
  expand(answer: CompactEvaluation | EvaluationResult): EvaluationResult {
    const source = answer as unknown as JsonObject;
    if (source.trace_format !== "compact") {
      return answer as EvaluationResult;
    }
    const values = isObject(source.actual_values) ? source.actual_values : {};
    const explain = typeof source.explain === "string" ? source.explain : "all";
    const out: JsonObject = {};
    for (const [key, value] of Object.entries(source)) {
      if (!COMPACT_KEYS.has(key)) {
        out[key] = key === "engine_results"
          ? (value as JsonObject[]).map((entry) => this.engine(entry, values, explain))
          : value;
      }
    }
    return out as unknown as EvaluationResult;
  }

  private engine(entry: JsonObject, values: JsonObject, explain: string): JsonObject {
    const trace = entry.trace;
    if (!isObject(trace)) {
      return entry;
    }
    const engineId = String(entry.engine_id);
    const layout = this.byEngine.get(engineId);
    if (layout === undefined || layout.key !== trace.layout) {
      throw new LayoutError(`no trace layout ${JSON.stringify(trace.layout)} for rule engine ${JSON.stringify(engineId)}: `
        + "fetch it with contextRuleEngine/traceLayout");
    }
    if (!isIndexList(trace.matched, layout.rules.length)) {
      throw new LayoutError(`rule engine ${JSON.stringify(engineId)}: matched rules do not fit the layout`);
    }
    const made = explain === "none" ? undefined
      : conditions(layout, unpack(trace.outcomes, layout.conditions.length), values);
    const matched = new Map<number, JsonObject>();
    for (const i of trace.matched) {
      const { matched: template, slots, mutable } = layout.rules[i];
      const rule: JsonObject = mutable ? structuredClone(template)
        : { ...template, memories: (template.memories as unknown[]).slice(), excluded: (template.excluded as unknown[]).slice() };
      rule.conditions = made === undefined ? [] : slots.map((s) => made[s]);
      matched.set(i, rule);
    }
    let rules = trace.matched.map((i) => matched.get(i)!);
    if (made !== undefined && explain === "all") { // every rule in order: the others unmatched, no memories
      rules = layout.rules.map(({ unmatched, slots, mutable }, i) => matched.get(i) ?? {
        ...(mutable ? structuredClone(unmatched) : unmatched), conditions: slots.map((s) => made[s]), memories: [],
        excluded: [],
      });
    }
    const out: JsonObject = { engine_id: entry.engine_id, rules }; // the full answer's key order
    for (const [key, value] of Object.entries(entry)) {
      if (key !== "engine_id" && key !== "trace") {
        out[key] = value;
      }
    }
    return out;
  }
}

/** Each distinct condition's object, in layout order (children before their groups). */
function conditions(layout: Prepared, outcomes: boolean[], values: JsonObject): JsonObject[] {
  const made: JsonObject[] = [];
  layout.conditions.forEach((spec, i) => {
    const result = outcomes[i];
    if (spec.kind === "leaf") {
      let leaf: JsonObject;
      // own keys only: a field named `constructor` or `toString` is no member of Object.prototype here
      if (!Object.hasOwn(values, spec.variable)) {
        leaf = { ...spec.absent, result };
      } else {
        const actual = values[spec.variable];
        leaf = actual === null ? { ...spec.nullActual, result } : { ...spec.present, result, actual };
      }
      if (Object.hasOwn(leaf, "value")) {
        leaf.value = fresh(leaf.value);
      }
      if (Object.hasOwn(leaf, "ignore_case")) {
        leaf.ignore_case = fresh(leaf.ignore_case);
      }
      made.push(leaf);
    } else if (spec.kind === "group") {
      made.push({ result, group: spec.group, conditions: spec.children.map((c) => made[c]) });
    } else {
      made.push({ ...fresh(spec.template), result });
    }
  });
  return made;
}

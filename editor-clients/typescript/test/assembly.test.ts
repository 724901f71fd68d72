/** contextAssembly/*: assemble with its events, per-call routing, the other assembly methods, cancellation. */

import { strict as assert } from "node:assert";
import { writeFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import {
  ContextAssemblyError,
  ErrorCodes,
  LayoutError,
  TraceLayouts,
  type AssemblyEvent,
  type AssemblyCompleteEvent,
  type CompactEvaluation,
} from "@context-assembly/client";

import { exampleRequest, TEST_TIMEOUT_MS, withClient } from "./helpers";

const REQUEST = exampleRequest();

test("assemble sends its events in order, all with the result's assembly_id", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const completed: AssemblyCompleteEvent[] = [];
    const everything: string[] = [];
    const unsubscribe = client.on("contextAssembly/complete", (params) => {
      completed.push(params);
    });
    const unsubscribeAll = client.on("*", (_params, method) => {
      everything.push(method);
    });
    const mine: AssemblyEvent[] = [];
    const result = await client.assemble(REQUEST, { onEvent: (event) => mine.push(event) });

    const id = result.meta.assembly_id;
    assert.match(id, /^[0-9a-f]{32}$/);
    const methods = mine.map((e) => e.method);
    assert.deepEqual(methods.slice(0, 2), ["contextAssembly/started", "contextAssembly/rulesEvaluated"]);
    assert.equal(methods.at(-1), "contextAssembly/complete");
    const pipelines = methods.filter((m) => m === "contextAssembly/pipelineComplete").length;
    assert.ok(pipelines >= 1);
    assert.deepEqual(methods.slice(2, 2 + pipelines), Array(pipelines).fill("contextAssembly/pipelineComplete"));
    assert.equal(methods.length, pipelines + 3);
    assert.ok(mine.every((e) => e.params.assembly_id === id), "every event carries the assembly's id");
    const evaluated = mine[1];
    assert.ok(evaluated.method === "contextAssembly/rulesEvaluated");
    assert.equal(pipelines, evaluated.params.resolved.length, "one pipelineComplete per resolved memory");
    const done = mine.at(-1)!;
    assert.ok(done.method === "contextAssembly/complete");
    assert.deepEqual(done.params.meta, result.meta);

    assert.equal(completed.length, 1);
    assert.equal(completed[0].assembly_id, id);
    assert.deepEqual(everything, methods, "the global handler saw the same notifications");

    // the result: every section in the fixed order, within budget, the state section carries the task
    assert.deepEqual(Object.keys(result.context), [
      "state", "warnings", "constraints", "knowledge", "history", "suggestions", "working_memory",
    ]);
    assert.ok(result.meta.token_estimate <= 4000);
    assert.equal(result.meta.total_items, Object.values(result.context).flat().length);
    assert.ok(result.context.state.some((item) => item.content.includes("Fix the login timeout")));
    assert.ok(result.trace.memory_calls.some((call) => call.reference === "architecture-docs"));
    for (const item of Object.values(result.context).flat()) {
      assert.equal(typeof item.id, "string");
      assert.equal(typeof item.tokens, "number");
    }

    unsubscribe();
    unsubscribeAll();
    await client.assemble({ ...REQUEST, assembly_id: "caller-chosen.1" });
    assert.equal(completed.length, 1, "unsubscribed");
    assert.equal(everything.length, methods.length, "unsubscribed from *");
  }));

test("a caller-chosen assembly_id is kept; concurrent assemblies each get their own events", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const seen: Set<string>[] = [new Set(), new Set()];
    const [first, second] = await Promise.all([
      client.assemble({ ...REQUEST, assembly_id: "first-1" }, { onEvent: (e) => seen[0].add(e.params.assembly_id) }),
      client.assemble(REQUEST, { onEvent: (e) => seen[1].add(e.params.assembly_id) }),
    ]);
    assert.equal(first.meta.assembly_id, "first-1");
    assert.deepEqual([...seen[0]], ["first-1"]);
    assert.deepEqual([...seen[1]], [second.meta.assembly_id]);
    assert.notEqual(second.meta.assembly_id, "first-1");
  }));

test("validate, memoryTypes, evaluateRules and requiredVariables", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const valid = await client.validate(REQUEST);
    assert.equal(valid.valid, true);
    assert.deepEqual(valid.errors, []);
    const invalid = await client.validate({ scope_variables: 5 } as never);
    assert.equal(invalid.valid, false);
    assert.equal(invalid.errors[0].path, "/scope_variables");

    const types = await client.memoryTypes();
    const docs = types.find((t) => t.id === "architecture-docs");
    assert.ok(docs, "architecture-docs is a memory type");
    assert.equal(typeof docs.section, "string");

    const evaluation = await client.evaluateRules(REQUEST);
    assert.ok(evaluation.matched_memories.includes("architecture-docs"));
    const planning = evaluation.engine_results.find((e) => e.engine_id === "planning");
    assert.ok(planning, "the planning engine was evaluated");
    const rule = planning.rules.find((r) => r.rule_id === "arch-in-planning");
    assert.ok(rule && rule.matched);
    assert.deepEqual(
      rule.conditions.map((c) => [c.field, c.operator, c.value, c.actual, c.result]),
      [["addVar.phase", "eq", "planning", "planning", true]],
    );
    assert.ok(evaluation.variables_used.includes("addVar.phase"));

    const otherPhase = await client.evaluateRules({
      ...REQUEST,
      additional_variables: { ...REQUEST.additional_variables, phase: "review" },
    });
    const again = otherPhase.engine_results.find((e) => e.engine_id === "planning")!;
    assert.equal(again.rules.find((r) => r.rule_id === "arch-in-planning")!.matched, false);

    const required = await client.requiredVariables(["architecture-docs", "no-such-memory"]);
    assert.deepEqual(required.scopes, ["project"]);
    assert.deepEqual(required.unknown_memory_ids, ["no-such-memory"]);
    assert.ok(required.variables.some((v) => v.key.startsWith("scope.project.")));
  }));

test("compact answers expand into exactly the full answer, in every explain mode", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    for (const explain of ["all", "matched", "none"] as const) {
      for (const request of [REQUEST, { ...REQUEST, rule_engine_ids: ["planning"] }]) {
        const full = await client.evaluateRules({ ...request, explain });
        const compact = await client.request<CompactEvaluation>("contextAssembly/evaluateRules",
          { ...request, explain, trace_format: "compact" });
        assert.equal(compact.trace_format, "compact");
        assert.equal(compact.explain, explain);
        assert.ok(compact.engine_results.every((e) => !("rules" in e) && Array.isArray(e.trace.matched)));
        assert.deepEqual(compact.matched_memories, full.matched_memories); // usable as it comes
        const expanded = await client.evaluateRules({ ...request, explain }, { compactTrace: true });
        assert.equal(JSON.stringify(expanded), JSON.stringify(full), `explain ${explain}`); // key order included
      }
    }
    const one = await client.ruleEngines.evaluate(REQUEST, "planning", { compactTrace: true });
    assert.equal(JSON.stringify(one), JSON.stringify(await client.ruleEngines.evaluate(REQUEST, "planning")));

    // nothing shared between answers: changing one leaves the next as the server says
    const first = await client.evaluateRules({ ...REQUEST, explain: "none" }, { compactTrace: true });
    const planning = first.engine_results.find((e) => e.engine_id === "planning")!;
    planning.rules[0].memories.push("changed");
    planning.rules[0].conditions.push({ result: true });
    const again = await client.evaluateRules({ ...REQUEST, explain: "none" }, { compactTrace: true });
    assert.equal(JSON.stringify(again), JSON.stringify(await client.evaluateRules({ ...REQUEST, explain: "none" })));

    // an answer needs its own layouts; a malformed one is refused clearly
    const compact = await client.request<CompactEvaluation>("contextAssembly/evaluateRules",
      { ...REQUEST, trace_format: "compact" });
    const fresh = new TraceLayouts();
    assert.deepEqual(fresh.missing(compact).map(([engineId]) => engineId).sort(),
      compact.engine_results.map((e) => e.engine_id).sort());
    assert.throws(() => fresh.expand(compact), LayoutError);
    for (const [engineId, key] of fresh.missing(compact)) {
      fresh.add(await client.ruleEngines.traceLayout(engineId, key));
    }
    assert.equal(JSON.stringify(fresh.expand(compact)), JSON.stringify(await client.evaluateRules(REQUEST)));
    const entry = compact.engine_results[0];
    const outOfRange = { ...compact, engine_results: [{ ...entry, trace: { ...entry.trace, matched: [9999] } }] };
    assert.throws(() => fresh.expand(outOfRange), /matched rules do not fit the layout/);
    const badBits = { ...compact, engine_results: [{ ...entry, trace: { ...entry.trace, outcomes: "not base64!" } }] };
    assert.throws(() => fresh.expand(badBits), /not base64/);
    await assert.rejects(client.ruleEngines.traceLayout(entry.engine_id, "0".repeat(32)),
      (error: unknown) => error instanceof ContextAssemblyError && error.code === ErrorCodes.Conflict);
  }));

test("endTurn clears the thread's working memory and only that thread's", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    await client.memory.write("working://ts-turn/plan", ["read the logs", "fix the timeout"]);
    await client.memory.write("working://ts-turn/notes", "the timeout is 5 s");
    await client.memory.write("working://ts-other/plan", ["keep me"]);

    assert.deepEqual(await client.endTurn("ts-turn"), { thread_id: "ts-turn", cleared: 2 });
    assert.deepEqual(await client.memory.read("working://ts-turn/plan"), {
      uri: "working://ts-turn/plan", exists: false, value: null,
    });
    assert.deepEqual((await client.memory.read("working://ts-other/plan")).value, ["keep me"]);
    assert.deepEqual(await client.endTurn("ts-turn"), { thread_id: "ts-turn", cleared: 0 });

    // any thread id an assembly takes (`/` and `#` included); an empty one is refused
    await client.memory.write(`working://${encodeURIComponent("acme/shop#42")}/plan`, 1);
    assert.deepEqual(await client.endTurn("acme/shop#42"), { thread_id: "acme/shop#42", cleared: 1 });
    await assert.rejects(client.endTurn(""), (error: unknown) =>
      error instanceof ContextAssemblyError && error.code === ErrorCodes.InvalidParams);
    assert.equal((await client.memory.read("working://ts-other/plan")).exists, true, "the server keeps serving");
  }));

test("an AbortSignal cancels a call; the server keeps serving", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const early = new AbortController();
    early.abort();
    await assert.rejects(client.assemble(REQUEST, { signal: early.signal }), (error: unknown) => {
      assert.ok(error instanceof ContextAssemblyError);
      assert.equal(error.code, ErrorCodes.Cancelled);
      assert.equal(error.isCancelled, true);
      return true;
    });

    const late = new AbortController();
    const call = client.assemble(REQUEST, { signal: late.signal });
    late.abort(new Error("no longer needed"));
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof ContextAssemblyError);
      assert.equal(error.code, ErrorCodes.Cancelled);
      assert.match(error.message, /no longer needed/);
      return true;
    });

    const unused = new AbortController(); // a signal that never fires changes nothing
    const result = await client.assemble(REQUEST, { signal: unused.signal });
    assert.ok(result.meta.total_items > 0);
  }));

test("$/progress for a workDoneToken reaches on() and \"*\"", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const progress: unknown[] = [];
    const all: string[] = [];
    const unsubscribe = client.on("$/progress", (params) => {
      progress.push(params);
    });
    const unsubscribeAll = client.on("*", (_params, method) => {
      all.push(method);
    });
    // every field of the request schema type-checks (workDoneToken, system_prompt and tools needed a cast)
    const assembled = await client.assemble({ ...REQUEST, workDoneToken: "tok-1", system_prompt: "Answer briefly.",
      tools: [{ name: "grep", description: "search the code for text", parameters: { type: "object" } }] });
    assert.ok(JSON.stringify(assembled).includes("Answer briefly."));
    unsubscribe();
    unsubscribeAll();
    assert.ok(progress.length >= 2, `progress seen: ${progress.length}`);
    assert.ok(progress.every((p) => (p as { token: unknown }).token === "tok-1"));
    assert.ok(all.includes("$/progress"));
  }),
);

test("compact answers expand exactly for fields named like Object.prototype's members", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client, workspace) => {
    // `field in values` followed the prototype chain: `constructor` and `toString` counted as present
    const engine = { id: "proto", enabled: true, rules: [
      { id: "r1", when: [{ field: "constructor", operator: "not_exists" }], then: { add_memories: ["m1"] } },
      { id: "r2", when: [{ field: "toString", operator: "exists" }], then: { add_memories: ["m2"] } },
      { id: "r3", when: [{ field: "__proto__", operator: "not_exists" }], then: { add_memories: ["m3"] } },
      { id: "r4", when: [{ field: "valueOf", operator: "eq", value: 1 }], then: { add_memories: ["m4"] } },
    ] };
    writeFileSync(path.join(workspace, ".codebolt", "context-rule-engines", "proto.json"), JSON.stringify(engine));
    const request = { scope_variables: {}, additional_variables: { constructor: 1 }, rule_engine_ids: ["proto"] };
    for (const explain of ["all", "matched", "none"] as const) {
      const full = await client.evaluateRules({ ...request, explain });
      const expanded = await client.evaluateRules({ ...request, explain }, { compactTrace: true });
      assert.equal(JSON.stringify(expanded), JSON.stringify(full), `explain ${explain}`);
    }
  }));

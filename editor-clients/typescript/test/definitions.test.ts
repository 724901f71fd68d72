/** contextRuleEngine/*, persistentMemory/*, memoryIngestion/* and the llm/complete callback. */

import { strict as assert } from "node:assert";
import { test } from "node:test";

import { ContextAssemblyError, ErrorCodes, type IngestionEvent, type LlmRequest } from "@context-assembly/client";

import { exampleRequest, TEST_TIMEOUT_MS, withClient } from "./helpers";

const REQUEST = exampleRequest();

function hasCode(code: number) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ContextAssemblyError, `expected a ContextAssemblyError, got ${String(error)}`);
    assert.equal(error.code, code);
    return true;
  };
}

test("ruleEngines: create, rules, update, evaluate, variables, validate, delete", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const ids = (await client.ruleEngines.list()).map((e) => e.id);
    assert.ok(ids.includes("planning") && ids.includes("review"));
    assert.equal((await client.ruleEngines.get("planning")).name, "Planning phase rules");

    const engine = await client.ruleEngines.create({ id: "ts-rules", name: "TS", enabled: true, rules: [] });
    assert.equal(engine.id, "ts-rules");
    const rule = await client.ruleEngines.addRule("ts-rules", {
      name: "agent",
      when: [{ field: "scope.agent.agent_name", operator: "eq", value: "code-agent" }],
      then: { add_memories: ["user-preferences"] },
    });
    assert.equal(typeof rule.id, "string", "an id is generated for the rule");
    const updated = await client.ruleEngines.updateRule("ts-rules", rule.id!, { priority: 7 });
    assert.equal(updated.priority, 7);
    assert.equal((await client.ruleEngines.update("ts-rules", { description: "from Node" })).description, "from Node");
    const stored = await client.ruleEngines.get("ts-rules");
    assert.equal(stored.rules?.length, 1);
    assert.equal(stored.rules?.[0].priority, 7);
    assert.deepEqual(stored.rules?.[0].when, [{ field: "scope.agent.agent_name", operator: "eq", value: "code-agent" }]);

    const evaluation = await client.ruleEngines.evaluate(REQUEST, "ts-rules");
    assert.deepEqual(evaluation.engine_results.map((e) => e.engine_id), ["ts-rules"]);
    assert.equal(evaluation.engine_results[0].rules[0].matched, true);
    assert.deepEqual(evaluation.matched_memories, ["user-preferences"]);
    const all = await client.ruleEngines.evaluate(REQUEST);
    assert.ok(all.engine_results.length >= 3);

    const variables = await client.ruleEngines.possibleVariables();
    const agentName = variables.find((v) => v.key === "scope.agent.agent_name");
    assert.ok(agentName, "the new rule's variable is listed");
    assert.ok(agentName.used_by?.some((use) => use.engine_id === "ts-rules"));

    assert.equal((await client.ruleEngines.validate({ id: "draft", rules: [] })).valid, true);
    const bad = await client.ruleEngines.validate(
      { id: "draft", rules: [{ id: "r", when: [{ field: "input.text", operator: "equalz", value: "x" }], then: {} }] },
      { uri: "file:///draft.json" },
    );
    assert.equal(bad.valid, false);
    assert.ok(bad.errors.some((e) => e.path.startsWith("/rules/0/when/0")), JSON.stringify(bad.errors));

    assert.deepEqual(await client.ruleEngines.deleteRule("ts-rules", rule.id!), {
      engine_id: "ts-rules", rule_id: rule.id, deleted: true,
    });
    assert.deepEqual((await client.ruleEngines.get("ts-rules")).rules, []);
    assert.deepEqual(await client.ruleEngines.delete("ts-rules"), { id: "ts-rules", deleted: true });
    await assert.rejects(client.ruleEngines.get("ts-rules"), hasCode(ErrorCodes.NotFound));
  }));

test("persistentMemory: CRUD, validate, execute, stepSpecs", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    assert.ok((await client.persistentMemory.list()).some((m) => m.id === "architecture-docs"));
    assert.equal((await client.persistentMemory.get("recent-history")).id, "recent-history");
    await client.memory.write("kv://users/u-ada", { theme: "dark", "scope.user.user_id": "u-ada" });
    const definition = {
      id: "ts-prefs",
      retrieval: { pipeline: [{ type: "kv_get", namespace: "users", keys: ["u-ada"] }] },
    };
    assert.equal((await client.persistentMemory.validate(definition)).valid, true);
    assert.equal((await client.persistentMemory.create(definition)).id, "ts-prefs");
    assert.equal((await client.persistentMemory.update("ts-prefs", { label: "Prefs" })).label, "Prefs");
    const executed = await client.persistentMemory.execute("ts-prefs", REQUEST);
    assert.ok(executed.items.length >= 1, JSON.stringify(executed));
    assert.ok(executed.items[0].content.includes("dark"));
    assert.deepEqual(executed.steps.map((s) => s.type), ["kv_get"]);
    const invalid = await client.persistentMemory.validate({ id: "x", retrieval: { pipeline: [{ type: "no_such_step" }] } });
    assert.equal(invalid.valid, false);

    const steps = await client.persistentMemory.stepSpecs();
    const names = steps.map((s) => s.name);
    for (const name of ["derive_query", "vector_search", "kv_get", "filter", "rank", "format", "conditional"]) {
      assert.ok(names.includes(name), `step ${name} is described`);
    }
    const rank = steps.find((s) => s.name === "rank")!;
    assert.equal(typeof rank.group, "string");
    assert.ok(rank.params.every((p) => typeof p.name === "string" && typeof p.required === "boolean"));

    assert.deepEqual(await client.persistentMemory.delete("ts-prefs"), { id: "ts-prefs", deleted: true });
    await assert.rejects(client.persistentMemory.execute("ts-prefs", REQUEST), hasCode(ErrorCodes.NotFound));
  }));

test("ingestion: CRUD, execute with its events, activate/disable, memory/event, processorSpecs", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    assert.ok((await client.ingestion.list(true)).some((p) => p.id === "task-completion-embed"));
    const pipeline = {
      id: "ts-notes",
      trigger: "manual",
      processors: [{ id: "n", type: "normalizer", input: "payload.text", output: "clean", operations: ["trim"] }],
      routing: [{ from: "clean", write_to: "kv://notes/latest" }],
    };
    assert.equal((await client.ingestion.validate(pipeline)).valid, true);
    assert.equal((await client.ingestion.create(pipeline)).id, "ts-notes");
    const events: IngestionEvent[] = [];
    const result = await client.ingestion.execute("ts-notes", { text: "  hello  " }, { onEvent: (e) => events.push(e) });
    assert.equal(result.status, "ok", JSON.stringify(result));
    assert.deepEqual(events.map((e) => e.method), [
      "memoryIngestion/executionStarted",
      "memoryIngestion/processorCompleted",
      "memoryIngestion/executionCompleted",
    ]);
    assert.ok(events.every((e) => e.params.execution_id === result.execution_id));
    assert.equal((await client.memory.read("kv://notes/latest")).value, "hello");

    assert.equal((await client.ingestion.disable("ts-notes")).status, "disabled");
    assert.ok(!(await client.ingestion.list(true)).some((p) => p.id === "ts-notes"));
    assert.equal((await client.ingestion.activate("ts-notes")).status, "active");
    assert.equal((await client.ingestion.update("ts-notes", { label: "Notes" })).label, "Notes");
    assert.equal((await client.ingestion.get("ts-notes")).label, "Notes");

    const ran: string[] = [];
    const fired = await client.memory.event("onTaskCompleted", { summary: "Shipped the login fix." }, {
      scope_variables: { task: { task_id: "T-118" } },
      onEvent: (e) => ran.push(e.params.pipeline_id),
    });
    assert.equal(fired.trigger, "onTaskCompleted");
    assert.deepEqual(fired.executions.map((e) => e.pipeline_id), ["task-completion-embed"]);
    assert.deepEqual([...new Set(ran)], ["task-completion-embed"]);

    const processors = await client.ingestion.processorSpecs();
    assert.ok(processors.some((p) => p.name === "chunker"));
    assert.ok(processors.some((p) => p.name === "llm_extract" && p.uses_llm));
    assert.deepEqual(await client.ingestion.delete("ts-notes"), { id: "ts-notes", deleted: true });
  }));

test("idempotency keys: a retried event or append lands once", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const turn = { role: "user", content: "yes" };
    assert.equal((await client.memory.write("episodic://ts-idem", turn, "t1")).duplicate, undefined);
    assert.equal((await client.memory.write("episodic://ts-idem", turn, "t1")).duplicate, true);
    assert.equal(((await client.memory.read("episodic://ts-idem")).value as unknown[]).length, 1);
    const options = { idempotency_key: "ts-e1" };
    const first = await client.memory.event("onTaskCompleted", { summary: "Once." }, options);
    const again = await client.memory.event("onTaskCompleted", { summary: "Once." }, options);
    assert.deepEqual(again.executions, [{ ...first.executions[0], duplicate: true }]);
    await assert.rejects(client.memory.event("onTaskCompleted", { summary: "Twice?" }, options),
      (error: unknown) => error instanceof ContextAssemblyError && error.code === ErrorCodes.Conflict);
    const ran = await client.ingestion.execute("task-completion-embed", { summary: "Once." },
      { trigger: "onTaskCompleted", idempotency_key: "ts-e1" });
    assert.equal(ran.duplicate, true);
  }));

test("the llm callback answers llm/complete", { timeout: TEST_TIMEOUT_MS }, async () => {
  const asked: LlmRequest[] = [];
  const pipeline = {
    id: "facts",
    trigger: "manual",
    processors: [{ id: "x", type: "llm_extract", input: "payload.text", output: "facts" }],
    routing: [{ from: "facts", write_to: "kv://facts/latest" }],
  };
  await withClient(
    async (client) => {
      await client.ingestion.create(pipeline);
      const result = await client.ingestion.execute("facts", { text: "We decided to use JWT." });
      assert.equal(result.status, "ok", JSON.stringify(result));
      assert.equal(asked.length, 1);
      assert.ok(asked[0].prompt.includes("We decided to use JWT."));
      assert.deepEqual((await client.memory.read("kv://facts/latest")).value, [{ decision: "use JWT" }]);
    },
    {
      llm: async (request, { signal }) => {
        assert.equal(signal.aborted, false);
        asked.push(request);
        return { text: '[{"decision": "use JWT"}]' };
      },
    },
  );
  await withClient(async (client) => {
    // without a callback the LLM step is skipped with a warning
    await client.ingestion.create(pipeline);
    const result = await client.ingestion.execute("facts", { text: "x" });
    assert.equal(result.processors[0].status, "skipped");
    assert.ok(result.warnings.length > 0);
  });
});

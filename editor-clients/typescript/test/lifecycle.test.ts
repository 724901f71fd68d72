/** memory/* round trips, typed errors, start-up failures and a clean shutdown. */

import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import { ContextAssemblyClient, ContextAssemblyError, ErrorCodes, VERSION } from "@context-assembly/client";

import { alive, exampleRequest, makeWorkspace, PACKAGE_ROOT, startClient, TEST_TIMEOUT_MS, withClient } from "./helpers";

function hasCode(code: number, check?: (error: ContextAssemblyError) => void) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ContextAssemblyError, `expected a ContextAssemblyError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    check?.(error);
    return true;
  };
}

test("memory: write/read keeps dotted and reserved keys exactly; list and delete", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    const value = {
      "scope.agent.agent_name": "code-agent",
      $schema: "urn:example",
      class: 1,
      jsonrpc: "2.0",
      id: 1,
      method: "m",
      nested: { "addVar.phase": ["planning", null, true, 1.5], "": "empty key", "ü ✓": "unicode" },
    };
    assert.deepEqual(await client.memory.write("kv://ts/k", value), { uri: "kv://ts/k", written: true });
    const read = await client.memory.read("kv://ts/k");
    assert.equal(read.exists, true);
    assert.deepEqual(read.value, value);
    assert.deepEqual(Object.keys(read.value as object), Object.keys(value));

    await client.memory.write("markdown://ts-note", "# Note\n\nfrom Node");
    assert.equal((await client.memory.read("markdown://ts-note")).exists, true);

    assert.deepEqual((await client.memory.list("kv://ts/")).map((i) => i.uri), ["kv://ts/k"]);
    assert.deepEqual(await client.memory.delete("kv://ts/k"), { uri: "kv://ts/k", deleted: true });
    assert.deepEqual(await client.memory.read("kv://ts/k"), { uri: "kv://ts/k", exists: false, value: null });
    assert.equal((await client.memory.delete("kv://ts/k")).deleted, false);
    await assert.rejects(client.memory.delete("log://events"), (error: unknown) => error instanceof ContextAssemblyError);
  }));

test("errors carry their codes: NotFound, InvalidParams with data.errors, Conflict, MethodNotFound", { timeout: TEST_TIMEOUT_MS }, () =>
  withClient(async (client) => {
    await assert.rejects(client.ruleEngines.get("ghost"), hasCode(ErrorCodes.NotFound, (error) => {
      assert.deepEqual(error.data, { id: "ghost" });
      assert.equal(error.kind, "NotFound");
      assert.equal(error.isNotFound, true);
      assert.ok(error instanceof Error && error.name === "ContextAssemblyError");
    }));
    await assert.rejects(client.persistentMemory.get("ghost"), hasCode(ErrorCodes.NotFound));
    await assert.rejects(client.ingestion.get("ghost"), hasCode(ErrorCodes.NotFound));

    await assert.rejects(client.assemble({ scope_variables: 5 } as never), hasCode(ErrorCodes.InvalidParams, (error) => {
      assert.ok(Array.isArray(error.data.errors));
      assert.deepEqual(error.errors, error.data.errors);
      assert.equal(error.errors[0].path, "/scope_variables");
      assert.equal(typeof error.errors[0].message, "string");
    }));
    await assert.rejects(
      client.request("contextAssembly/requiredVariables", { memory_ids: "not-a-list" }),
      hasCode(ErrorCodes.InvalidParams, (error) => assert.ok(error.errors.length >= 1)),
    );
    await assert.rejects(client.ruleEngines.create({ id: "planning", rules: [] }), hasCode(ErrorCodes.Conflict));
    await assert.rejects(client.request("no/such", {}), hasCode(ErrorCodes.MethodNotFound));

    // the server keeps serving after every failure
    assert.equal((await client.memory.read("kv://still/serving")).exists, false);
    assert.ok((await client.assemble(exampleRequest())).meta.total_items > 0);
  }));

test("shutdown ends the sidecar cleanly; later calls fail with ConnectionClosed", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { root, cleanup } = makeWorkspace();
  try {
    const client = await startClient(root);
    const pid = client.pid!;
    assert.ok(alive(pid));
    assert.equal(client.exitCode, undefined);
    assert.equal(client.serverInfo.name, "context-assembly");
    const [first, second] = await Promise.all([client.shutdown(), client.dispose()]);
    assert.deepEqual(first, { code: 0, signal: null });
    assert.deepEqual(second, first, "shutdown is idempotent");
    assert.equal(client.exitCode, 0);
    assert.deepEqual(await client.exited, { code: 0, signal: null });
    assert.equal(alive(pid), false, "the process is gone");
    await assert.rejects(client.memory.read("kv://x"), hasCode(ErrorCodes.ConnectionClosed));
  } finally {
    cleanup();
  }
});

test("a sidecar that dies fails the pending calls with ConnectionClosed", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { root, cleanup } = makeWorkspace();
  try {
    const client = await startClient(root);
    const pending = client.assemble(exampleRequest());
    process.kill(client.pid!, "SIGKILL");
    const results = await Promise.allSettled([pending, client.memory.read("kv://x")]);
    for (const result of results) {
      if (result.status === "rejected") {
        assert.ok(result.reason instanceof ContextAssemblyError);
        assert.equal(result.reason.code, ErrorCodes.ConnectionClosed);
        // the calls the crash hit say why too, not only the later ones
        assert.match(result.reason.message, /the sidecar exited \(signal SIGKILL\)/);
      }
    }
    assert.equal((await client.exited).signal, "SIGKILL");
    await assert.rejects(client.memory.read("kv://x"), hasCode(ErrorCodes.ConnectionClosed, (error) => {
      assert.match(error.message, /SIGKILL/);
    }));
    assert.deepEqual(await client.shutdown(), { code: null, signal: "SIGKILL" });
  } finally {
    cleanup();
  }
});

test("start-up failures are reported", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { root, cleanup } = makeWorkspace();
  try {
    await assert.rejects(
      ContextAssemblyClient.start({ workspace: root, command: "context-assembly-no-such-command" }),
      hasCode(ErrorCodes.ConnectionClosed, (error) => assert.match(error.message, /could not be started/)),
    );
    await assert.rejects(
      ContextAssemblyClient.start({ workspace: path.join(root, "missing") }),
      /is not a directory/,
    );
  } finally {
    cleanup();
  }
});

test("a sidecar that never answers initialize fails the start after timeoutMs, and is killed", { timeout: TEST_TIMEOUT_MS }, async () => {
  const { root, cleanup } = makeWorkspace();
  const pidFile = path.join(root, "hung.pid");
  try {
    const hung = [process.execPath, "-e", "require('fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1000)", pidFile];
    const started = Date.now();
    await assert.rejects(ContextAssemblyClient.start({ workspace: root, command: hung, timeoutMs: 1500 }), hasCode(ErrorCodes.Timeout));
    // it asked the hung sidecar to shut down (another timeoutMs) and waited for its exit (another): 3 × timeoutMs
    assert.ok(Date.now() - started < 2.5 * 1500, `${Date.now() - started} ms`);
    assert.equal(alive(Number(readFileSync(pidFile, "utf8"))), false);
  } finally {
    cleanup();
  }
});

test("VERSION is the package version", () => {
  const manifest = JSON.parse(readFileSync(path.join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string };
  assert.equal(VERSION, manifest.version);
});

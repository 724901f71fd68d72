import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe as suite, test } from "node:test";

import {
  configurationItem,
  DEFAULT_START_TIMEOUT_S,
  explicitValue,
  FORWARDED,
  MAX_START_TIMEOUT_S,
  RESTART_SECTIONS,
  SECTION,
  serverSettings,
  startTimeoutOf,
} from "../src/settings";

const PACKAGE = path.resolve(__dirname, "..", "..");
const manifest = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8"));
const contributed: Record<string, { default?: unknown }> = manifest.contributes.configuration.properties;
const serverSchema = JSON.parse(readFileSync(path.join(PACKAGE, "..", "..", "schemas", "settings.schema.json"), "utf8"));

suite("settings forwarding", () => {
  test("explicit values only: folder over workspace over user; defaults are not values", () => {
    assert.equal(explicitValue({ defaultValue: 5000 }), undefined);
    assert.equal(explicitValue(undefined), undefined);
    assert.equal(explicitValue({ defaultValue: 1, globalValue: 2 }), 2);
    assert.equal(explicitValue({ globalValue: 2, workspaceValue: 3 }), 3);
    assert.equal(explicitValue({ globalValue: 2, workspaceValue: 3, workspaceFolderValue: 4 }), 4);
    assert.equal(explicitValue({ globalValue: 4000, workspaceValue: null }), null); // "no budget" overrides
  });

  test("the section the server gets: snake_case keys, nested stores, nothing unset, no client settings", () => {
    const set: Record<string, unknown> = { maxTokens: 2000, pipelineTimeoutMs: 800, "stores.backend": "embedded",
      diagnosticsDebounceMs: 0, snapshots: false, "server.command": ["x"], "trace.server": "verbose" };
    assert.deepEqual(serverSettings((key) => set[key]), {
      max_tokens: 2000, pipeline_timeout_ms: 800, stores: { backend: "embedded" }, diagnostics_debounce_ms: 0, snapshots: false,
    });
    assert.deepEqual(serverSettings(() => undefined), {});
    assert.deepEqual(serverSettings((key) => (key === "maxTokens" ? null : undefined)), { max_tokens: null });
    // VS Code drops a null written in settings.json: 0 is "no budget"
    assert.deepEqual(serverSettings((key) => (key === "maxTokens" ? 0 : undefined)), { max_tokens: null });
    assert.deepEqual(serverSettings((key) => (key === "maxTokens" ? 1 : undefined)), { max_tokens: 1 });
  });

  test("the start timeout: the default unless a positive number, never past the manifest's maximum", () => {
    assert.equal(startTimeoutOf(undefined), DEFAULT_START_TIMEOUT_S);
    assert.equal(startTimeoutOf(0), DEFAULT_START_TIMEOUT_S);
    assert.equal(startTimeoutOf(-1), DEFAULT_START_TIMEOUT_S);
    assert.equal(startTimeoutOf("10"), DEFAULT_START_TIMEOUT_S);
    assert.equal(startTimeoutOf(2.5), 2.5);
    assert.equal(startTimeoutOf(999999999), MAX_START_TIMEOUT_S); // a timer past 2^31-1 ms would fire at once
    assert.equal(startTimeoutOf(Infinity), DEFAULT_START_TIMEOUT_S);
    assert.equal(contributed[`${SECTION}.server.startTimeoutSeconds`]!.default, DEFAULT_START_TIMEOUT_S);
    assert.equal((contributed[`${SECTION}.server.startTimeoutSeconds`] as { maximum?: number }).maximum, MAX_START_TIMEOUT_S);
    assert.ok(MAX_START_TIMEOUT_S * 1000 < 2 ** 31 - 1);
  });

  test("only the contextAssembly section is shaped; other sections are left to VS Code", () => {
    assert.deepEqual(configurationItem(SECTION, (key) => (key === "tokenizer" ? "o200k" : undefined)), { tokenizer: "o200k" });
    assert.equal(configurationItem("editor", () => 1), undefined);
    assert.equal(configurationItem(undefined, () => 1), undefined);
  });

  test("every forwarded setting is contributed, and is a key of the server's settings schema", () => {
    for (const [vscodeKey, serverKey] of FORWARDED) {
      assert.ok(`${SECTION}.${vscodeKey}` in contributed, vscodeKey);
      let schema = serverSchema;
      for (const part of serverKey.split(".")) {
        schema = schema.properties?.[part];
        assert.ok(schema, `${serverKey} is not in settings.schema.json`);
      }
      const contributedDefault = contributed[`${SECTION}.${vscodeKey}`]!.default;
      assert.deepEqual(contributedDefault, schema.default ?? null, `default of ${vscodeKey}`);
    }
  });

  test("every contributed setting is forwarded or client-side", () => {
    const forwarded = new Set(FORWARDED.map(([key]) => `${SECTION}.${key}`));
    for (const key of Object.keys(contributed)) {
      assert.ok(forwarded.has(key) || key.startsWith(`${SECTION}.server.`) || key === `${SECTION}.trace.server`, key);
    }
    assert.deepEqual(RESTART_SECTIONS, [`${SECTION}.server`]);
    assert.ok(`${SECTION}.server.command` in contributed && `${SECTION}.server.python` in contributed);
  });
});

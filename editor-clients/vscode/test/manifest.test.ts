import * as assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { describe as suite, test } from "node:test";

import { EDITOR_VALIDATED, schemaFile, schemaForUrn, SERVER_VALIDATED, URN_PREFIX } from "../src/schemas";
import {
  commandTarget,
  documentSelector,
  isCodeboltDocument,
  isCodeboltPath,
  ownFile,
  PROJECT_PATTERN,
  projectOf,
  projectsOf,
  startupProjects,
} from "../src/workspace";

const PACKAGE = path.resolve(__dirname, "..", "..");
const REPO = path.resolve(PACKAGE, "..", "..");
const manifest = JSON.parse(readFileSync(path.join(PACKAGE, "package.json"), "utf8"));

suite("package.json", () => {
  test("entry point, engines and activation", () => {
    assert.equal(manifest.main, "./dist/extension.js");
    assert.equal(manifest.engines.vscode, "^1.82.0");
    assert.ok(manifest.activationEvents.includes("workspaceContains:**/.codebolt/**"));
    for (const language of ["json", "jsonc", "yaml"]) assert.ok(manifest.activationEvents.includes(`onLanguage:${language}`));
  });

  test("the Python extension is optional (looked up at run time, never required)", () => {
    assert.equal(manifest.extensionDependencies, undefined);
    assert.equal(manifest.extensionPack, undefined);
    const source = readFileSync(path.join(PACKAGE, "src", "extension.ts"), "utf8");
    assert.match(source, /getExtension\("ms-python\.python"\)/);
  });

  test("the three commands", () => {
    const commands = Object.fromEntries(manifest.contributes.commands.map((c: { command: string; title: string; category: string }) => [c.command, `${c.category}: ${c.title}`]));
    assert.deepEqual(commands, {
      "contextAssembly.restartServer": "Context Assembly: Restart server",
      "contextAssembly.assemble": "Context Assembly: Assemble context…",
      "contextAssembly.showTracePage": "Context Assembly: Show trace page…",
    });
    const source = readFileSync(path.join(PACKAGE, "src", "extension.ts"), "utf8");
    for (const command of Object.keys(commands)) assert.ok(source.includes(`registerCommand("${command}"`), command);
  });

  test("pinned dev dependencies, vscode-languageclient 9", () => {
    for (const [name, version] of Object.entries({ ...manifest.dependencies, ...manifest.devDependencies })) {
      assert.match(String(version), /^\d+\.\d+\.\d+$/, `${name} is not pinned`);
    }
    assert.match(manifest.dependencies["vscode-languageclient"], /^9\./);
  });

  test("jsonValidation only for files the server does not check in the editor, with bundled schemas", () => {
    const entries: { fileMatch: string[]; url: string }[] = manifest.contributes.jsonValidation;
    assert.deepEqual(entries.map((e) => e.fileMatch), [["**/.codebolt/context-assembly.json"]]);
    for (const entry of entries) {
      const kind = path.basename(entry.url).replace(/\.schema\.json$/, "");
      assert.ok(EDITOR_VALIDATED.includes(kind), `${kind} is validated by the server already`);
      assert.ok(existsSync(path.join(PACKAGE, entry.url)), `${entry.url} (run npm run copy-schemas)`);
    }
  });

  test("the lockfile carries no resolved (registry) URLs", () => {
    const lock = readFileSync(path.join(PACKAGE, "package-lock.json"), "utf8");
    assert.ok(!lock.includes('"resolved"'));
  });
});

suite("schemas for VS Code's JSON service", () => {
  const bundled = (file: string) => {
    const p = path.join(REPO, "schemas", file);
    return existsSync(p) ? readFileSync(p, "utf8") : undefined;
  };

  test("every kind is a published schema, and the published ones are all classified", () => {
    const published = readdirSync(path.join(REPO, "schemas")).filter((f) => f.endsWith(".schema.json")).sort();
    assert.deepEqual([...SERVER_VALIDATED, ...EDITOR_VALIDATED].map(schemaFile).sort(), published);
  });

  test("server-validated kinds get a schema that asserts nothing (no duplicate diagnostics, completion or hover)", () => {
    for (const kind of SERVER_VALIDATED) {
      const schema = JSON.parse(schemaForUrn(`${URN_PREFIX}${kind}`, bundled)!);
      assert.deepEqual(Object.keys(schema).sort(), ["$id", "description", "title"], kind);
    }
  });

  test("the others get the published schema; unknown URNs are not ours", () => {
    for (const kind of EDITOR_VALIDATED) assert.equal(schemaForUrn(`${URN_PREFIX}${kind}`, bundled), bundled(schemaFile(kind)));
    assert.equal(schemaForUrn(`${URN_PREFIX}nope`, bundled), undefined);
    assert.equal(schemaForUrn("urn:other:thing", bundled), undefined);
  });

  test("each $schema used by the example workspace is served", () => {
    const root = path.join(REPO, "examples", "quickstart", ".codebolt");
    const seen: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory() && !["db", "kuzu", ".locks", "memory", "vectordb"].includes(entry.name)) walk(full);
        else if (entry.isFile() && entry.name.endsWith(".json")) {
          const match = /"\$schema"\s*:\s*"([^"]+)"/.exec(readFileSync(full, "utf8"));
          if (match) seen.push(match[1]!);
        }
      }
    };
    walk(root);
    assert.ok(seen.length > 0);
    for (const urn of seen) assert.notEqual(schemaForUrn(urn, bundled), undefined, urn);
  });
});

suite("which documents and folders", () => {
  test("document selector: JSON and YAML under the project's own .codebolt/, by pattern", () => {
    assert.equal(PROJECT_PATTERN, ".codebolt/**"); // relative to the project: not a nested project's
    assert.deepEqual(documentSelector(PROJECT_PATTERN), [
      { scheme: "file", language: "json", pattern: ".codebolt/**" },
      { scheme: "file", language: "jsonc", pattern: ".codebolt/**" },
      { scheme: "file", language: "yaml", pattern: ".codebolt/**" },
    ]);
  });

  test(".codebolt paths", () => {
    assert.ok(isCodeboltPath("/p/.codebolt/PersistentMemory/a.json"));
    assert.ok(isCodeboltPath("C:\\p\\.codebolt\\x.yaml"));
    assert.ok(!isCodeboltPath("/p/codebolt/a.json"));
    assert.ok(!isCodeboltPath("/p/.codebolt"));
    assert.ok(isCodeboltDocument("file", "yaml", "/p/.codebolt/ContextRuleEngine/02.yaml"));
    assert.ok(!isCodeboltDocument("untitled", "json", "/p/.codebolt/a.json"));
    assert.ok(!isCodeboltDocument("file", "markdown", "/p/.codebolt/memory/a.md"));
  });

  test("project of a .codebolt file and the server root", () => {
    assert.equal(projectOf("/w/examples/quickstart/.codebolt/PersistentMemory/a.json"), "/w/examples/quickstart");
    assert.equal(projectOf("/.codebolt/a.json"), "/");
    assert.equal(projectOf("C:\\w\\.codebolt\\a.json"), "C:\\w");
    assert.equal(projectOf("/w/a.json"), undefined);
  });

  test("the projects served at start: folders holding .codebolt/ and open documents' projects, else the first found", () => {
    const has = (folder: string) => folder === "/b" || folder === "/d";
    assert.deepEqual(startupProjects(["/a", "/b", "/d"], has, [], []), ["/b", "/d"]);
    assert.deepEqual(startupProjects(["/a", "/b"], has, ["/a/n/.codebolt/x.json", "/b/.codebolt/y.json"], []), ["/b", "/a/n"]);
    assert.deepEqual(startupProjects(["/a"], has, [], ["/a/q/.codebolt/x.json", "/a/r/.codebolt/x.json"]), ["/a/q"]);
    assert.deepEqual(startupProjects(["/a"], has, [], []), []);
    assert.deepEqual(projectsOf(["/a/.codebolt/x.json", "/a/.codebolt/y/z.json", "/a/n/.codebolt/x.json", "/x.json"]),
      ["/a", "/a/n"]);
  });

  test("a watched change concerns its own project only: not a nested one's, not another's", () => {
    assert.ok(ownFile("/a", "/a/.codebolt/context-rule-engines/x.json"));
    assert.ok(ownFile("/a", "/a/.codebolt")); // the folder itself (deleted, replaced)
    assert.ok(!ownFile("/a", "/a/n/.codebolt/x.json"));
    assert.ok(!ownFile("/a", "/a/n/.codebolt"));
    assert.ok(!ownFile("/a", "/b/.codebolt/x.json"));
    assert.ok(!ownFile("/a", "/a/src/x.json"));
    assert.ok(ownFile("C:\\w", "C:\\w\\.codebolt\\x.json"));
    assert.ok(ownFile("C:\\w", "C:\\w\\.codebolt"));
  });

  test("the project a command runs on: the active document's, the one running, the one known, else a choice", () => {
    assert.deepEqual(commandTarget("/b/.codebolt/x.json", ["/a"], ["/a", "/b"]), { kind: "one", project: "/b" });
    assert.deepEqual(commandTarget(undefined, ["/a"], ["/a", "/b"]), { kind: "one", project: "/a" });
    assert.deepEqual(commandTarget(undefined, [], ["/b"]), { kind: "one", project: "/b" });
    assert.deepEqual(commandTarget(undefined, ["/a", "/b"], ["/c", "/a"]), { kind: "choose", projects: ["/a", "/b", "/c"] });
    assert.deepEqual(commandTarget("/a/README.json", [], []), { kind: "none" });
  });
});

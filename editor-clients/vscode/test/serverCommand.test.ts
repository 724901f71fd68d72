import * as assert from "node:assert/strict";
import { describe as suite, test } from "node:test";

import {
  commandSetting,
  describe,
  findOnPath,
  INSTALL_COMMAND,
  notFoundMessage,
  resolveServerCommand,
  splitCommandLine,
  type ResolveDeps,
} from "../src/serverCommand";

function deps(overrides: Partial<ResolveDeps> & { calls?: string[] } = {}): ResolveDeps & { calls: string[] } {
  const calls = overrides.calls ?? [];
  return {
    calls,
    activePython: overrides.activePython ?? (async () => (calls.push("activePython"), undefined)),
    hasModule: overrides.hasModule ?? (async (python) => (calls.push(`hasModule ${python}`), false)),
    which: overrides.which ?? ((name) => (calls.push(`which ${name}`), undefined)),
  };
}

suite("server command resolution order", () => {
  test("1. contextAssembly.server.command (array) wins over everything and asks nothing", async () => {
    const d = deps({ which: () => "/usr/bin/context-assembly", activePython: async () => "/py" });
    const r = await resolveServerCommand({ command: ["/opt/ca/bin/context-assembly", "serve", "--workspace", "/w"], python: "/usr/bin/python3" }, d);
    assert.ok(r.ok);
    assert.deepEqual(r.server, { command: "/opt/ca/bin/context-assembly", args: ["serve", "--workspace", "/w"], source: "setting:command" });
  });

  test("1. a string command is split like a shell", async () => {
    const r = await resolveServerCommand({ command: `"/my tools/python" -m context_assembly serve` }, deps());
    assert.ok(r.ok);
    assert.equal(r.server.command, "/my tools/python");
    assert.deepEqual(r.server.args, ["-m", "context_assembly", "serve"]);
  });

  test("2. contextAssembly.server.python when no command is set", async () => {
    const d = deps();
    const r = await resolveServerCommand({ command: [], python: " /venv/bin/python " }, d);
    assert.ok(r.ok);
    assert.deepEqual(r.server, { command: "/venv/bin/python", args: ["-m", "context_assembly", "serve"], source: "setting:python" });
    assert.deepEqual(d.calls, []);
  });

  test("3. the Python extension's active interpreter when it has the module", async () => {
    const d = deps({ activePython: async () => "/env/bin/python", hasModule: async () => true, which: () => "/usr/bin/context-assembly" });
    const r = await resolveServerCommand({ command: null, python: "" }, d);
    assert.ok(r.ok);
    assert.deepEqual(r.server, { command: "/env/bin/python", args: ["-m", "context_assembly", "serve"], source: "python-extension" });
  });

  test("4. PATH when the active interpreter lacks the module (with a note)", async () => {
    const calls: string[] = [];
    const d = deps({ calls, activePython: async () => "/env/bin/python", which: (name) => (calls.push(`which ${name}`), `/usr/local/bin/${name}`) });
    const r = await resolveServerCommand({}, d);
    assert.ok(r.ok);
    assert.deepEqual(r.server, { command: "/usr/local/bin/context-assembly", args: ["serve"], source: "path" });
    assert.deepEqual(calls, ["hasModule /env/bin/python", "which context-assembly"]);
    assert.match(r.notes.join("\n"), /\/env\/bin\/python.*no context_assembly/);
  });

  test("4. PATH when the Python extension is missing or fails", async () => {
    for (const activePython of [async () => undefined, async () => { throw new Error("boom"); }]) {
      const r = await resolveServerCommand({}, deps({ activePython, which: () => "/bin/context-assembly" }));
      assert.ok(r.ok);
      assert.equal(r.server.source, "path");
    }
  });

  test("nothing found: a clear message with the install command", async () => {
    const r = await resolveServerCommand({}, deps());
    assert.equal(r.ok, false);
    assert.ok(!r.ok && r.reason.includes(INSTALL_COMMAND));
    assert.ok(notFoundMessage().includes("pip install <checkout-or-wheel>"));
    assert.ok(notFoundMessage().includes("pipx install"));
    assert.ok(!notFoundMessage().includes("pip install context-assembly"), "no such package is published");
    assert.ok(notFoundMessage().includes("contextAssembly.server.command"));
  });

  test("invalid settings are reported, not guessed around", async () => {
    for (const command of [42, [1, 2], [""], { program: "x" }, "python 'unterminated"]) {
      const r = await resolveServerCommand({ command }, deps({ which: () => "/bin/context-assembly" }));
      assert.equal(r.ok, false, JSON.stringify(command));
      assert.match(!r.ok ? r.reason : "", /contextAssembly\.server\.command/);
    }
    const r = await resolveServerCommand({ python: 3 }, deps());
    assert.ok(!r.ok && /contextAssembly\.server\.python/.test(r.reason));
  });

  test("unset values fall through", () => {
    for (const value of [undefined, null, "", "   ", []]) assert.equal(commandSetting(value), undefined);
  });
});

suite("splitCommandLine", () => {
  test("words, quotes and escapes", () => {
    assert.deepEqual(splitCommandLine("  context-assembly   serve "), ["context-assembly", "serve"]);
    assert.deepEqual(splitCommandLine(`py -m "context_assembly" 'serve' --ws "a b"`), ["py", "-m", "context_assembly", "serve", "--ws", "a b"]);
    assert.deepEqual(splitCommandLine(`a\\ b "c\\"d" '' x`), ["a b", 'c"d', "", "x"]);
    assert.deepEqual(splitCommandLine(`C:\\\\Python\\\\python.exe`), ["C:\\Python\\python.exe"]);
    assert.deepEqual(splitCommandLine(String.raw`C:\Users\me\.venv\Scripts\context-assembly.exe serve`),
      [String.raw`C:\Users\me\.venv\Scripts\context-assembly.exe`, "serve"]);
    assert.throws(() => splitCommandLine(`"open`), /unterminated/);
  });

  test("describe quotes what a shell would need quoted", () => {
    assert.equal(describe({ command: "/my tools/py", args: ["-m", "context_assembly", "serve"], source: "setting:command" }),
      `"/my tools/py" -m context_assembly serve`);
  });
});

suite("findOnPath", () => {
  test("POSIX: first PATH entry with an executable", () => {
    const exists = new Set(["/b/context-assembly", "/c/context-assembly"]);
    assert.equal(findOnPath("context-assembly", { PATH: "/a::/b:/c" }, "linux", (p) => exists.has(p)), "/b/context-assembly");
    assert.equal(findOnPath("context-assembly", { PATH: "" }, "linux", () => true), undefined);
    assert.equal(findOnPath("context-assembly", {}, "darwin", () => true), undefined);
  });

  test("Windows: PATHEXT, `Path` spelling and quoted entries", () => {
    const exists = new Set(["C:\\Py\\Scripts\\context-assembly.EXE"]);
    const found = findOnPath("context-assembly", { Path: 'C:\\bin;"C:\\Py\\Scripts"', PATHEXT: ".COM;.EXE" }, "win32", (p) => exists.has(p));
    assert.equal(found, "C:\\Py\\Scripts\\context-assembly.EXE");
  });
});

/**
 * The bundle (dist/extension.js) loaded under plain Node with a minimal fake of the `vscode` API:
 * what activation registers, the schema provider, and the "server not found" path. (The language
 * client itself needs a real VS Code; its pieces are tested in the other files.)
 */
import * as assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import Module = require("node:module");
import * as path from "node:path";
import { describe as suite, test } from "node:test";

const PACKAGE = path.resolve(__dirname, "..", "..");
const BUNDLE = path.join(PACKAGE, "dist", "extension.js");

type Listener = (value: unknown) => void;

function fakeVscode(options: { openDocuments: unknown[]; choice?: string }) {
  const calls: { method: string; args: unknown[] }[] = [];
  const record = (method: string) => (...args: unknown[]) => {
    calls.push({ method, args });
    return { dispose() {} };
  };
  const openListeners: Listener[] = [];
  const vscode = {
    calls,
    openListeners,
    Uri: {
      file: (fsPath: string) => ({ scheme: "file", fsPath, path: fsPath }),
      parse: (value: string) => ({ scheme: value.split(":")[0], path: value.slice(value.indexOf(":") + 1), fsPath: value }),
    },
    window: {
      createOutputChannel: (name: string) => {
        calls.push({ method: "createOutputChannel", args: [name] });
        return { appendLine: (line: string) => calls.push({ method: "output", args: [line] }), show() {}, dispose() {} };
      },
      showErrorMessage: async (...args: unknown[]) => {
        calls.push({ method: "showErrorMessage", args });
        return options.choice;
      },
      showWarningMessage: async (...args: unknown[]) => {
        calls.push({ method: "showWarningMessage", args });
        return undefined;
      },
    },
    commands: {
      registerCommand: record("registerCommand"),
      executeCommand: async (...args: unknown[]) => void calls.push({ method: "executeCommand", args }),
    },
    env: { clipboard: { writeText: async (text: string) => void calls.push({ method: "clipboard", args: [text] }) } },
    extensions: { getExtension: (id: string) => (calls.push({ method: "getExtension", args: [id] }), undefined) },
    workspace: {
      workspaceFolders: undefined,
      textDocuments: options.openDocuments,
      findFiles: async () => [],
      getWorkspaceFolder: () => undefined,
      getConfiguration: () => ({ get: () => undefined, inspect: () => ({}) }),
      registerTextDocumentContentProvider: (scheme: string, provider: unknown) => {
        calls.push({ method: "registerTextDocumentContentProvider", args: [scheme, provider] });
        return { dispose() {} };
      },
      onDidChangeConfiguration: record("onDidChangeConfiguration"),
      onDidChangeWorkspaceFolders: record("onDidChangeWorkspaceFolders"),
      onDidOpenTextDocument: (listener: Listener) => {
        openListeners.push(listener);
        return { dispose() {} };
      },
    },
  };
  // the rest of the API: classes the language client extends at load time, namespaces it never uses here
  return new Proxy(vscode, {
    get(target, key, receiver) {
      if (key in target || typeof key !== "string") return Reflect.get(target, key, receiver);
      return /^[A-Z]/.test(key) ? class {} : {};
    },
  });
}

function loadBundle(vscode: unknown): { activate(context: unknown): Promise<void>; deactivate(): Promise<void> } {
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = loader._load;
  loader._load = function (request: string, ...rest: unknown[]) {
    return request === "vscode" ? vscode : original.call(this, request, ...rest);
  };
  try {
    delete require.cache[BUNDLE];
    return require(BUNDLE);
  } finally {
    loader._load = original;
  }
}

function context() {
  return { subscriptions: [] as { dispose(): unknown }[], extensionUri: { fsPath: PACKAGE, scheme: "file", path: PACKAGE } };
}

suite("the bundled extension", () => {
  test("is CommonJS and leaves `vscode` external", () => {
    const text = readFileSync(BUNDLE, "utf8");
    assert.match(text, /require\("vscode"\)/);
    assert.ok(!text.includes("node_modules/vscode-languageclient"), "no paths of the build machine");
  });

  test("activation without .codebolt/ registers the commands and the schema provider, and starts nothing", async () => {
    const vscode = fakeVscode({ openDocuments: [] });
    const extension = loadBundle(vscode);
    const ctx = context();
    await extension.activate(ctx);
    const methods = vscode.calls.map((c) => c.method);
    assert.deepEqual(vscode.calls.filter((c) => c.method === "createOutputChannel").map((c) => c.args[0]), ["Context Assembly"]);
    assert.deepEqual(vscode.calls.filter((c) => c.method === "registerCommand").map((c) => c.args[0]),
      ["contextAssembly.restartServer", "contextAssembly.assemble", "contextAssembly.showTracePage",
        "contextAssembly.forwardToServer"]); // the last runs a code lens on its own project's server
    assert.ok(!methods.includes("getExtension"), "no server lookup before a .codebolt/ document");
    assert.equal(vscode.openListeners.length, 1, "waits for a .codebolt/ document");

    const registration = vscode.calls.find((c) => c.method === "registerTextDocumentContentProvider")!;
    assert.equal(registration.args[0], "urn");
    const provider = registration.args[1] as { provideTextDocumentContent(uri: unknown): string | undefined };
    const settings = provider.provideTextDocumentContent({ scheme: "urn", path: "context-assembly:schema:settings" });
    assert.equal(settings, readFileSync(path.join(PACKAGE, "schemas", "settings.schema.json"), "utf8"));
    const rules = JSON.parse(provider.provideTextDocumentContent({ scheme: "urn", path: "context-assembly:schema:rule-engine" })!);
    assert.equal(rules.properties, undefined);
    await extension.deactivate();
  });

  test("a command with no project in the window says how to get one, and starts nothing", async () => {
    const vscode = fakeVscode({ openDocuments: [] });
    const extension = loadBundle(vscode);
    await extension.activate(context());
    for (const id of ["contextAssembly.assemble", "contextAssembly.showTracePage", "contextAssembly.restartServer"]) {
      const registration = vscode.calls.find((c) => c.method === "registerCommand" && c.args[0] === id)!;
      await (registration.args[1] as () => Promise<void>)();
    }
    const warnings = vscode.calls.filter((c) => c.method === "showWarningMessage").map((c) => String(c.args[0]));
    assert.equal(warnings.length, 3, JSON.stringify(vscode.calls.map((c) => c.method)));
    for (const warning of warnings) assert.match(warning, /Open a folder that holds a \.codebolt\/ folder/);
    assert.ok(!vscode.calls.some((c) => c.method === "getExtension"), "no server looked for");
    await extension.deactivate();
  });

  test("an open .codebolt/ document and no server anywhere: an error naming pip install, with a settings button", async () => {
    const savedPath = process.env.PATH;
    process.env.PATH = "";
    try {
      const document = { uri: { scheme: "file", fsPath: "/nowhere/.codebolt/PersistentMemory/a.json" }, languageId: "json" };
      const vscode = fakeVscode({ openDocuments: [document], choice: "Open Settings" });
      const extension = loadBundle(vscode);
      await extension.activate(context());
      await new Promise((resolve) => setTimeout(resolve, 20));
      const error = vscode.calls.find((c) => c.method === "showErrorMessage");
      assert.ok(error, JSON.stringify(vscode.calls.map((c) => c.method)));
      assert.match(String(error.args[0]), /pip install <checkout-or-wheel>/);
      assert.deepEqual(error.args.slice(1), ["Open Settings", "Copy Install Command"]);
      assert.deepEqual(vscode.calls.find((c) => c.method === "getExtension")?.args, ["ms-python.python"]);
      assert.deepEqual(vscode.calls.find((c) => c.method === "executeCommand")?.args,
        ["workbench.action.openSettings", "contextAssembly.server"]);
      await extension.deactivate();
    } finally {
      process.env.PATH = savedPath;
    }
  });
});

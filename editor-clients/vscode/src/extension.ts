/**
 * The VS Code extension: starts `context-assembly serve` over stdio with vscode-languageclient,
 * forwards the `contextAssembly` settings, and offers "Restart server", "Assemble context…" and
 * "Show trace page…".
 * The logic that does not need VS Code lives in modules tested under plain Node (see test/).
 */

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { accessSync, constants as fsConstants, readFileSync, statSync } from "node:fs";
import * as path from "node:path";

import * as vscode from "vscode";
import {
  LanguageClient,
  ResponseError,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";

import { renderAssembly, renderError } from "./render";
import { schemaForUrn } from "./schemas";
import { TRACE_PAGE_METHOD, tracePageHtml, tracePageParams, tracePageTitle } from "./tracePage";
import {
  describe,
  findOnPath,
  INSTALL_COMMAND,
  MODULE,
  resolveServerCommand,
} from "./serverCommand";
import { configurationItem, explicitValue, RESTART_SECTIONS, SECTION, type Inspected } from "./settings";
import { CODEBOLT, documentSelector, DOCUMENT_PATTERN, isCodeboltDocument, chooseRoot } from "./workspace";

const CLIENT_ID = "contextAssembly";
const CLIENT_NAME = "Context Assembly";
const OPEN_SETTINGS = "Open Settings";
const COPY_INSTALL = "Copy Install Command";
const SHOW_OUTPUT = "Show Output";

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME);
  controller = new Controller(output);
  const current = controller;
  context.subscriptions.push(
    output,
    { dispose: () => void current.stop() },
    vscode.commands.registerCommand("contextAssembly.restartServer", () => current.restart()),
    vscode.commands.registerCommand("contextAssembly.assemble", () => current.assemble()),
    vscode.commands.registerCommand("contextAssembly.showTracePage", () => current.showTracePage()),
    vscode.workspace.registerTextDocumentContentProvider("urn", new SchemaProvider(context.extensionUri)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_SECTIONS.some((section) => event.affectsConfiguration(section)) && current.started) {
        output.appendLine("The server settings changed: restarting the server.");
        void current.restart();
      }
    }),
  );

  if (vscode.workspace.textDocuments.some(isOurs) || (await workspaceHasCodebolt())) {
    await current.start();
    return;
  }
  // Activated by a JSON/YAML document elsewhere: start once a `.codebolt/` document opens.
  const waiting = vscode.workspace.onDidOpenTextDocument((document) => {
    if (isOurs(document)) {
      waiting.dispose();
      void current.start();
    }
  });
  context.subscriptions.push(waiting);
}

export async function deactivate(): Promise<void> {
  await controller?.stop();
  controller = undefined;
}

function isOurs(document: vscode.TextDocument): boolean {
  return isCodeboltDocument(document.uri.scheme, document.languageId, document.uri.fsPath);
}

async function workspaceHasCodebolt(): Promise<boolean> {
  if (!vscode.workspace.workspaceFolders?.length) return false;
  const found = await vscode.workspace.findFiles(DOCUMENT_PATTERN, undefined, 1);
  return found.length > 0;
}

/** Owns the language client: start, stop, restart, and the custom requests. */
class Controller {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  started = false;

  constructor(private readonly output: vscode.OutputChannel) {}

  async start(): Promise<void> {
    this.started = true;
    if (this.client !== undefined) return;
    this.starting ??= this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async stop(): Promise<void> {
    await this.starting?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    if (client === undefined) return;
    try {
      if (client.state !== State.Stopped) await client.stop(5000);
    } catch (error) {
      this.output.appendLine(`Stopping the server failed: ${String(error)}`);
    }
    await client.dispose().catch(() => undefined);
  }

  async restart(): Promise<void> {
    await this.stop();
    this.started = true;
    await this.start();
  }

  private async doStart(): Promise<void> {
    const folder = await serverRoot();
    const resolution = await resolveServerCommand(readServerSettings(folder?.uri), resolveDeps(folder?.uri));
    for (const note of resolution.notes) this.output.appendLine(note);
    if (!resolution.ok) {
      this.output.appendLine(resolution.reason);
      void notFound(resolution.reason);
      return;
    }
    const server = resolution.server;
    this.output.appendLine(`Starting ${describe(server)} (from ${server.source})${folder ? ` in ${folder.uri.fsPath}` : ""}`);

    const serverOptions: ServerOptions = {
      command: server.command,
      args: [...server.args],
      options: folder ? { cwd: folder.uri.fsPath } : {},
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: documentSelector(),
      outputChannel: this.output,
      traceOutputChannel: this.output,
      workspaceFolder: folder,
      synchronize: { configurationSection: SECTION },
      middleware: {
        workspace: {
          // the server pulls `contextAssembly`: answer with only the explicitly set settings, in its keys
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError || !Array.isArray(answers)) return answers;
            return params.items.map((item, i) => {
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder?.uri;
              const shaped = configurationItem(item.section, (key) => inspectSetting(key, scope));
              return shaped ?? answers[i];
            });
          },
        },
      },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.client = undefined;
      await client.dispose().catch(() => undefined);
      const message = `Context Assembly: could not start the server (${describe(server)}): ${errorText(error)}`;
      this.output.appendLine(message);
      void notFound(`${message}. Install it with \`${INSTALL_COMMAND}\` or check "contextAssembly.server.command".`);
    }
  }

  private async runningClient(): Promise<LanguageClient | undefined> {
    await this.start();
    const client = this.client;
    if (client === undefined) return undefined; // could not be found or started: already reported
    if (client.state !== State.Running) {
      const choice = await vscode.window.showErrorMessage("Context Assembly: the server is not running.", SHOW_OUTPUT);
      if (choice === SHOW_OUTPUT) this.output.show(true);
      return undefined;
    }
    return client;
  }

  private async taskText(title: string): Promise<string | undefined> {
    const text = await vscode.window.showInputBox({
      title,
      prompt: "The task text the context is assembled for",
      placeHolder: "e.g. fix the login timeout",
      ignoreFocusOut: true,
      validateInput: (value) => (value.trim() === "" ? "Enter the task text" : undefined),
    });
    return text === undefined || text.trim() === "" ? undefined : text;
  }

  /** The server's trace page of an assembly (the same page as `assemble --html`), in a web view. */
  async showTracePage(): Promise<void> {
    const client = await this.runningClient();
    if (client === undefined) return;
    const text = await this.taskText("Show trace page");
    if (text === undefined) return;
    let html: string;
    let title = tracePageTitle(undefined, text);
    const cancel = new vscode.CancellationTokenSource();
    try {
      const answer = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "Assembling context…", cancellable: true },
        (_progress, token) => {
          token.onCancellationRequested(() => cancel.cancel());
          return client.sendRequest(TRACE_PAGE_METHOD, tracePageParams(text), cancel.token);
        },
      );
      title = tracePageTitle(answer, text);
      html = tracePageHtml(answer) ?? renderError("The server answered without a trace page.", [], { nonce: randomBytes(18).toString("base64") });
    } catch (error) {
      if (cancel.token.isCancellationRequested) return;
      html = renderError(errorText(error), error instanceof ResponseError ? errorDetails(error.data) : [], { nonce: randomBytes(18).toString("base64") });
    } finally {
      cancel.dispose();
    }
    const panel = vscode.window.createWebviewPanel("contextAssembly.tracePage", title, vscode.ViewColumn.Beside,
      { enableScripts: false, enableCommandUris: false, localResourceRoots: [] });
    panel.webview.html = html;
  }

  async assemble(): Promise<void> {
    const client = await this.runningClient();
    if (client === undefined) return;
    const text = await this.taskText("Assemble context");
    if (text === undefined) return;

    let html: string;
    const nonce = randomBytes(18).toString("base64");
    const cancel = new vscode.CancellationTokenSource();
    try {
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "Assembling context…", cancellable: true },
        (_progress, token) => {
          token.onCancellationRequested(() => cancel.cancel());
          // $/cancelRequest is sent when the token fires
          return client.sendRequest("contextAssembly/assemble", { scope_variables: {}, input: { text } }, cancel.token);
        },
      );
      html = renderAssembly(result, { nonce, task: text });
    } catch (error) {
      if (cancel.token.isCancellationRequested) return;
      html = renderError(errorText(error), error instanceof ResponseError ? errorDetails(error.data) : [], { nonce });
    } finally {
      cancel.dispose();
    }
    const panel = vscode.window.createWebviewPanel(
      "contextAssembly.assembled",
      `Context: ${text.length > 40 ? `${text.slice(0, 39)}…` : text}`,
      vscode.ViewColumn.Beside,
      { enableScripts: false, enableCommandUris: false, localResourceRoots: [] },
    );
    panel.webview.html = html;
  }
}

function errorText(error: unknown): string {
  if (error instanceof ResponseError) return `${error.message} (${error.code})`;
  return error instanceof Error ? error.message : String(error);
}

function errorDetails(data: unknown): string[] {
  const errors = typeof data === "object" && data !== null ? (data as { errors?: unknown }).errors : undefined;
  if (!Array.isArray(errors)) return [];
  return errors.map((e) => {
    const entry = typeof e === "object" && e !== null ? (e as { path?: unknown; message?: unknown }) : {};
    return `${String(entry.path ?? "")}: ${String(entry.message ?? JSON.stringify(e))}`;
  });
}

async function notFound(message: string): Promise<void> {
  const choice = await vscode.window.showErrorMessage(message, OPEN_SETTINGS, COPY_INSTALL);
  if (choice === OPEN_SETTINGS) {
    await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.server`);
  } else if (choice === COPY_INSTALL) {
    await vscode.env.clipboard.writeText(INSTALL_COMMAND);
  }
}

function inspectSetting(key: string, scope: vscode.Uri | undefined): unknown {
  return explicitValue(vscode.workspace.getConfiguration(SECTION, scope).inspect(key) as Inspected | undefined);
}

function readServerSettings(scope: vscode.Uri | undefined): { command?: unknown; python?: unknown } {
  const config = vscode.workspace.getConfiguration(`${SECTION}.server`, scope);
  return { command: config.get<unknown>("command"), python: config.get<unknown>("python") };
}

/** The server's root as a workspace folder (a synthetic one when the project is not a workspace folder). */
async function serverRoot(): Promise<vscode.WorkspaceFolder | undefined> {
  const folders = vscode.workspace.workspaceFolders ?? [];
  const files = [
    ...vscode.workspace.textDocuments.filter(isOurs).map((d) => d.uri.fsPath),
    ...(folders.length ? (await vscode.workspace.findFiles(DOCUMENT_PATTERN, undefined, 1)).map((u) => u.fsPath) : []),
  ];
  const root = chooseRoot(
    folders.map((f) => f.uri.fsPath),
    (folder) => isDirectory(path.join(folder, CODEBOLT)),
    files,
  );
  if (root === undefined) return undefined;
  return (
    folders.find((f) => f.uri.fsPath === root) ?? { uri: vscode.Uri.file(root), name: path.basename(root), index: 0 }
  );
}

function isDirectory(candidate: string): boolean {
  try {
    return statSync(candidate).isDirectory();
  } catch {
    return false;
  }
}

function isExecutable(candidate: string): boolean {
  try {
    if (!statSync(candidate).isFile()) return false;
    if (process.platform !== "win32") accessSync(candidate, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** What `resolveServerCommand` needs from the machine and from the Python extension. */
function resolveDeps(scope: vscode.Uri | undefined) {
  return {
    activePython: () => activePythonInterpreter(scope),
    hasModule: (python: string) =>
      new Promise<boolean>((resolve) => {
        execFile(python, ["-c", `import ${MODULE}`], { timeout: 15000, windowsHide: true }, (error) => resolve(!error));
      }),
    which: (name: string) => findOnPath(name, process.env, process.platform, isExecutable),
  };
}

/** The interpreter of the active environment of `ms-python.python`, when that extension is installed. */
async function activePythonInterpreter(scope: vscode.Uri | undefined): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (extension === undefined) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const api: any = extension.isActive ? extension.exports : await extension.activate();
  const environments = api?.environments;
  if (environments?.getActiveEnvironmentPath) {
    const active = environments.getActiveEnvironmentPath(scope);
    const resolved = await environments.resolveEnvironment?.(active);
    const executable: unknown = resolved?.executable?.uri?.fsPath ?? active?.path;
    if (typeof executable === "string" && executable !== "") return executable;
  }
  // older API of the Python extension
  const command: unknown = api?.settings?.getExecutionDetails?.(scope)?.execCommand;
  if (Array.isArray(command) && typeof command[0] === "string") return command[0];
  return undefined;
}

/** Serves `urn:context-assembly:schema:*` to VS Code's JSON service (see schemas.ts). */
class SchemaProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly extensionUri: vscode.Uri) {}

  provideTextDocumentContent(uri: vscode.Uri): string | undefined {
    return schemaForUrn(`${uri.scheme}:${uri.path}`, (file) => {
      try {
        return readFileSync(path.join(this.extensionUri.fsPath, "schemas", file), "utf8");
      } catch {
        return undefined;
      }
    });
  }
}

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
  CloseAction,
  LanguageClient,
  ResponseError,
  State,
  type CloseHandlerResult,
  type DocumentSelector,
  type ErrorHandler,
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
  type ServerCommand,
} from "./serverCommand";
import { ServerProcess, settlesWithin, StartTimeout, withDeadline } from "./serverProcess";
import { configurationItem, explicitValue, RESTART_SECTIONS, SECTION, startTimeoutOf, type Inspected } from "./settings";
import {
  CODEBOLT,
  commandTarget,
  documentSelector,
  DOCUMENT_PATTERN,
  isCodeboltDocument,
  ownFile,
  PROJECT_PATTERN,
  projectOf,
  projectsOf,
  startupProjects,
} from "./workspace";

const CLIENT_ID = "contextAssembly";
const CLIENT_NAME = "Context Assembly";
const OPEN_SETTINGS = "Open Settings";
const COPY_INSTALL = "Copy Install Command";
const SHOW_OUTPUT = "Show Output";
const FIND_LIMIT = 2000; // `.codebolt/` files looked at to name the projects a command may run on
const EXIT_GRACE_MS = 3000; // after `exit`, before the process is ended by a signal

let servers: Servers | undefined;

/** Runs a server command (a code lens) on the server of the project named first: see `ProjectClient`. */
const FORWARD_COMMAND = "contextAssembly.forwardToServer";
const EXECUTE_COMMAND = "workspace/executeCommand";

/**
 * A language client that does not register the server's commands with VS Code: command ids are
 * global, so the second project's client would fail to start on "command already exists". The
 * commands reach the right server through `FORWARD_COMMAND` instead (see `Controller.forwardLens`).
 */
class ProjectClient extends LanguageClient {
  /** Until the server answered `initialize`, a failed start is reported by the extension, once, with the
   * server's last words: the library's own notification ("couldn't create connection") goes to the output only. */
  ran = false;
  /** Set when the extension stops the client: what the library says of it then is no news. */
  quiet = false;

  override registerFeature(feature: Parameters<LanguageClient["registerFeature"]>[0]): void {
    const method = (feature as { registrationType?: { method?: string } }).registrationType?.method;
    if (method !== EXECUTE_COMMAND) super.registerFeature(feature);
  }

  override error(message: string, data?: unknown, showNotification?: boolean | "force"): void {
    super.error(message, data, this.ran && !this.quiet ? showNotification : false);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME);
  servers = new Servers(output);
  const current = servers;
  context.subscriptions.push(
    output,
    { dispose: () => void current.stopAll() },
    vscode.commands.registerCommand("contextAssembly.restartServer", () => current.restartAll()),
    vscode.commands.registerCommand("contextAssembly.assemble", () => current.run((server) => server.assemble())),
    vscode.commands.registerCommand("contextAssembly.showTracePage", () => current.run((server) => server.showTracePage())),
    vscode.commands.registerCommand(FORWARD_COMMAND, (project: unknown, command: unknown, ...args: unknown[]) =>
      current.forward(project, command, args)),
    vscode.workspace.registerTextDocumentContentProvider("urn", new SchemaProvider(context.extensionUri)),
    vscode.workspace.onDidChangeConfiguration((event) => current.configurationChanged(event)),
    vscode.workspace.onDidChangeWorkspaceFolders((event) => void current.foldersChanged(event)),
    // a project's server starts once one of its `.codebolt/` documents opens
    vscode.workspace.onDidOpenTextDocument((document) => {
      const project = isOurs(document) ? projectOf(document.uri.fsPath) : undefined;
      if (project !== undefined) void current.serve(project);
    }),
  );
  await Promise.all((await current.startupProjects()).map((project) => current.serve(project)));
}

export async function deactivate(): Promise<void> {
  await servers?.stopAll();
  servers = undefined;
}

function isOurs(document: vscode.TextDocument): boolean {
  return isCodeboltDocument(document.uri.scheme, document.languageId, document.uri.fsPath);
}

/** The `.codebolt/` files of the workspace folders (a bounded search: enough to name the projects). */
async function codeboltFiles(limit = FIND_LIMIT): Promise<string[]> {
  if (!vscode.workspace.workspaceFolders?.length) return [];
  return (await vscode.workspace.findFiles(DOCUMENT_PATTERN, undefined, limit)).map((uri) => uri.fsPath);
}

/** One server per project (the folder holding a `.codebolt/`), each serving that project's documents. */
class Servers {
  private readonly byProject = new Map<string, Controller>();

  constructor(private readonly output: vscode.OutputChannel) {}

  /** The projects to serve at activation (see `startupProjects` in workspace.ts). */
  async startupProjects(): Promise<string[]> {
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const open = vscode.workspace.textDocuments.filter(isOurs).map((d) => d.uri.fsPath);
    const hasCodebolt = (folder: string) => isDirectory(path.join(folder, CODEBOLT));
    const direct = folders.some(hasCodebolt) || open.length > 0;
    return startupProjects(folders, hasCodebolt, open, direct ? [] : await codeboltFiles(1));
  }

  /** The project's server, started (started once; a start that failed is reported, not repeated). */
  async serve(project: string): Promise<Controller> {
    let server = this.byProject.get(project);
    if (server === undefined) {
      server = new Controller(project, this.output);
      this.byProject.set(project, server);
      await server.start();
    }
    return server;
  }

  async restartAll(): Promise<void> {
    const started = [...this.byProject.values()];
    if (started.length === 0) {
      const projects = await this.startupProjects();
      if (projects.length === 0) return void noProject();
      await Promise.all(projects.map((project) => this.serve(project)));
      return;
    }
    await Promise.all(started.map((server) => server.restart()));
  }

  async stopAll(): Promise<void> {
    const all = [...this.byProject.values()];
    this.byProject.clear();
    await Promise.all(all.map((server) => server.dispose()));
  }

  /** Folders removed from the window take their projects' servers along; added ones holding `.codebolt/` are served. */
  async foldersChanged(event: vscode.WorkspaceFoldersChangeEvent): Promise<void> {
    const removed = event.removed.map((folder) => folder.uri.fsPath);
    const gone = [...this.byProject.keys()].filter((project) => removed.some((folder) => isWithin(project, folder)));
    for (const project of gone) {
      const server = this.byProject.get(project)!;
      this.byProject.delete(project);
      this.output.appendLine(`The folder of ${project} left the window: stopping its server.`);
      void server.dispose();
    }
    const added = event.added.map((folder) => folder.uri.fsPath).filter((folder) => isDirectory(path.join(folder, CODEBOLT)));
    await Promise.all(added.map((project) => this.serve(project)));
  }

  configurationChanged(event: vscode.ConfigurationChangeEvent): void {
    for (const server of this.byProject.values()) {
      if (RESTART_SECTIONS.some((section) => event.affectsConfiguration(section, server.folder.uri))) {
        this.output.appendLine(`The server settings changed: restarting the server of ${server.project}.`);
        void server.restart();
      }
    }
  }

  /** A server command from one of the project's code lenses, sent to that project's server. */
  async forward(project: unknown, command: unknown, args: unknown[]): Promise<unknown> {
    const server = typeof project === "string" ? this.byProject.get(project) : undefined;
    if (server === undefined || typeof command !== "string") return undefined;
    return server.execute(command, args);
  }

  /** Runs a command on the project it is meant for (see `commandTarget`), asking when that is unclear. */
  async run(command: (server: Controller) => Promise<void>): Promise<void> {
    const active = vscode.window.activeTextEditor?.document;
    const activeFile = active !== undefined && isOurs(active) ? active.uri.fsPath : undefined;
    const target = commandTarget(activeFile, [...this.byProject.keys()], projectsOf(await codeboltFiles()));
    let project: string | undefined;
    if (target.kind === "one") project = target.project;
    else if (target.kind === "choose") {
      project = await vscode.window.showQuickPick([...target.projects], {
        title: "Context Assembly: which project?",
        placeHolder: "The folder whose .codebolt/ definitions and memories are used",
      });
    } else return void noProject();
    if (project !== undefined) await command(await this.serve(project));
  }
}

async function noProject(): Promise<void> {
  await vscode.window.showWarningMessage(
    "Context Assembly: no project here. Open a folder that holds a .codebolt/ folder (or a file inside one).",
  );
}

/** Owns one project's language client and the server process: start, stop, restart, custom requests. */
class Controller {
  readonly folder: vscode.WorkspaceFolder;
  private client: ProjectClient | undefined;
  private process: ServerProcess | undefined; // the running server's (a crash restart replaces it)
  private attempt: Attempt | undefined; // the start in progress
  private queue: Promise<void> = Promise.resolve(); // starts and stops, one at a time
  private generation = 0; // bumped by every stop: a start begun before it is abandoned
  private disposed = false;

  constructor(readonly project: string, private readonly output: vscode.OutputChannel) {
    this.folder = workspaceFolderOf(project);
  }

  /** Starts the server unless it runs (waits for a start or stop in progress first). */
  start(): Promise<void> {
    return this.serial(() => (this.client !== undefined || this.disposed ? Promise.resolve() : this.doStart()));
  }

  /** Stops the server: `shutdown`/`exit` when it runs; a start in progress is abandoned and its process ended. */
  stop(): Promise<void> {
    this.abandon();
    return this.serial(() => this.doStop());
  }

  async restart(): Promise<void> {
    this.abandon();
    return this.serial(async () => {
      await this.doStop();
      if (!this.disposed) await this.doStart();
    });
  }

  /** Stops for good: nothing starts after this (a restart or command still queued included). */
  dispose(): Promise<void> {
    this.disposed = true;
    return this.stop();
  }

  private serial(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step, step);
    this.queue = next.catch(() => undefined);
    return next;
  }

  /** Cuts a start in progress short: its waits end at once, its process is ended. */
  private abandon(): void {
    this.generation++;
    const attempt = this.attempt;
    if (attempt === undefined) return;
    attempt.cancel();
    void attempt.process?.terminate();
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    const process = this.process;
    this.client = undefined;
    this.process = undefined;
    let exitSent = false;
    if (client !== undefined) {
      client.quiet = true; // what the library says of a server we stop is no news
      try {
        if (client.state === State.Running) {
          await client.stop(5000);
          exitSent = true;
        }
      } catch (error) {
        this.output.appendLine(`Stopping the server failed: ${String(error)}`);
      }
      await client.dispose().catch(() => undefined);
    }
    if (process === undefined) return;
    // after `exit` the server ends by itself (let it finish its writes); otherwise it is ended now
    if (!exitSent || !(await settlesWithin(process.exited(), EXIT_GRACE_MS))) await process.terminate();
  }

  private async doStart(): Promise<void> {
    const attempt = new Attempt(this.generation);
    this.attempt = attempt;
    try {
      await this.startAttempt(attempt);
    } finally {
      if (this.attempt === attempt) this.attempt = undefined;
    }
  }

  private async startAttempt(attempt: Attempt): Promise<void> {
    const scope = this.folder.uri;
    const resolution = await attempt.unless(resolveServerCommand(readServerSettings(scope), resolveDeps(scope)))
      .catch((error: unknown) => (error instanceof Cancelled ? undefined : Promise.reject(error)));
    if (resolution === undefined || attempt.generation !== this.generation) return;
    for (const note of resolution.notes) this.output.appendLine(note);
    if (!resolution.ok) {
      this.output.appendLine(resolution.reason);
      void notFound(resolution.reason);
      return;
    }
    const server = resolution.server;
    this.output.appendLine(`Starting ${describe(server)} (from ${server.source}) in ${this.project}`);
    const timeout = startTimeout(scope);
    const client: ProjectClient = new ProjectClient(CLIENT_ID, CLIENT_NAME, this.spawner(server, attempt, () => client, timeout),
      { ...this.clientOptions(), ...this.failureOptions(() => client) });
    client.onDidChangeState((event) => (client.ran ||= event.newState === State.Running));
    try {
      await attempt.unless(withDeadline(client.start(), timeout, () => void attempt.process?.terminate()));
    } catch (error) {
      const ending = attempt.process?.ending; // before it is ended here: did it die on its own?
      client.quiet = true;
      await client.dispose().catch(() => undefined);
      await attempt.process?.terminate();
      if (error instanceof Cancelled || attempt.generation !== this.generation) return; // stopped: no news
      this.reportFailedStart(server, error, attempt.process, ending);
      return;
    }
    this.client = client;
    this.process = attempt.process;
  }

  /** The language client's ServerOptions: spawns the server (again after a crash, the library's restart),
   * each spawn bounded by the start timeout until the server answers `initialize`. */
  private spawner(server: ServerCommand, attempt: Attempt, client: () => ProjectClient, timeout: number): ServerOptions {
    return async () => {
      if (attempt.generation !== this.generation) throw new Cancelled();
      const process = await ServerProcess.start({ command: server.command, args: server.args, cwd: this.project });
      if (attempt.generation !== this.generation) {
        void process.terminate();
        throw new Cancelled();
      }
      attempt.process = process;
      if (client().ran) {
        this.process = process; // a restart after a crash: no start() awaits it, so the deadline is here
        const timer = setTimeout(() => client().state !== State.Running && void process.terminate(), timeout * 1000);
        void process.exited().then(() => clearTimeout(timer));
        client().onDidChangeState((event) => event.newState === State.Running && clearTimeout(timer));
      }
      return process.child;
    };
  }

  /** A server that dies before answering `initialize` would die again: reported once, not restarted.
   * Once it answered, a crash restarts it (the library's policy); a stopped one is left alone. */
  private failureOptions(client: () => ProjectClient): Pick<LanguageClientOptions, "errorHandler" | "initializationFailedHandler"> {
    let fallback: ErrorHandler | undefined;
    const policy = (): ErrorHandler => (fallback ??= client().createDefaultErrorHandler());
    return {
      errorHandler: {
        error: (error, message, count) => policy().error(error, message, count),
        closed: (): CloseHandlerResult | Promise<CloseHandlerResult> =>
          client().ran && !client().quiet ? policy().closed() : { action: CloseAction.DoNotRestart, handled: true },
      },
      initializationFailedHandler: () => false, // reported by the extension, with the server's last words
    };
  }

  /** `ending`: how the process had ended by itself when the start failed (undefined: it had not). */
  private reportFailedStart(server: ServerCommand, error: unknown, process: ServerProcess | undefined,
                            ending: string | undefined): void {
    let why = error instanceof StartTimeout ? error.message : errorText(error);
    if (!(error instanceof StartTimeout) && ending !== undefined) {
      why = `the server ${ending}${process?.lastErrorLine ? `: ${process.lastErrorLine}` : ""}`;
    }
    const message = `Context Assembly: could not start the server of ${this.project} (${describe(server)}): ${why}`;
    this.output.appendLine(message);
    if (error instanceof StartTimeout || ending !== undefined) void failedStart(message, this.output);
    else void notFound(`${message}. Install it with \`${INSTALL_COMMAND}\` or check "contextAssembly.server.command".`);
  }

  private clientOptions(): LanguageClientOptions {
    const folder = this.folder;
    return {
      // VS Code's RelativePattern (the protocol's shape is passed to `languages.match` unconverted)
      documentSelector: documentSelector(new vscode.RelativePattern(folder.uri, PROJECT_PATTERN)) as unknown as DocumentSelector,
      outputChannel: this.output,
      traceOutputChannel: this.output,
      workspaceFolder: folder,
      synchronize: { configurationSection: SECTION },
      middleware: {
        provideCodeLenses: async (document, token, next) => (await next(document, token))?.map((lens) => this.forwardLens(lens)),
        resolveCodeLens: async (lens, token, next) => {
          const resolved = await next(lens, token);
          return resolved ? this.forwardLens(resolved) : resolved;
        },
        workspace: {
          // the server watches `**/.codebolt/**` (the whole window): only its own project's files concern it
          didChangeWatchedFile: (event, next) =>
            ownFile(this.project, vscode.Uri.parse(event.uri).fsPath) ? next(event) : Promise.resolve(),
          // the server pulls `contextAssembly`: answer with only the explicitly set settings, in its keys
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (answers instanceof ResponseError || !Array.isArray(answers)) return answers;
            return params.items.map((item, i) => {
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder.uri;
              const shaped = configurationItem(item.section, (key) => inspectSetting(key, scope));
              return shaped ?? answers[i];
            });
          },
        },
      },
    };
  }

  /** The lens's command, run through FORWARD_COMMAND on this project's server. */
  private forwardLens(lens: vscode.CodeLens): vscode.CodeLens {
    const command = lens.command;
    if (command !== undefined && command.command !== FORWARD_COMMAND) {
      lens.command = { ...command, command: FORWARD_COMMAND, arguments: [this.project, command.command, ...(command.arguments ?? [])] };
    }
    return lens;
  }

  /** `workspace/executeCommand` on this project's server (what the language client would have done). */
  async execute(command: string, args: unknown[]): Promise<unknown> {
    const client = await this.runningClient();
    if (client === undefined) return undefined;
    try {
      return await client.sendRequest(EXECUTE_COMMAND, { command, arguments: args });
    } catch (error) {
      void vscode.window.showErrorMessage(`Context Assembly: ${command} failed: ${errorText(error)}`);
      return undefined;
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

/** A start given up because the server was stopped or restarted meanwhile. */
class Cancelled extends Error {
  constructor() {
    super("the start was cancelled");
  }
}

/** One start of a server: its generation, its process once spawned, and a way to cut its waits short. */
class Attempt {
  process: ServerProcess | undefined;
  private readonly cancelled: Promise<never>;
  cancel: () => void = () => undefined;

  constructor(readonly generation: number) {
    this.cancelled = new Promise<never>((_, reject) => (this.cancel = () => reject(new Cancelled())));
    this.cancelled.catch(() => undefined); // nobody may be waiting when it is cancelled
  }

  /** `work`, or Cancelled as soon as the attempt is. */
  unless<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.cancelled]);
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

/** The project as the client's workspace folder: the workspace folder it is, else a synthetic one. */
function workspaceFolderOf(project: string): vscode.WorkspaceFolder {
  const folders = vscode.workspace.workspaceFolders ?? [];
  return folders.find((f) => f.uri.fsPath === project) ?? { uri: vscode.Uri.file(project), name: path.basename(project), index: 0 };
}

/** `contextAssembly.server.startTimeoutSeconds`: how long the server has to answer `initialize`. */
function startTimeout(scope: vscode.Uri): number {
  const value = vscode.workspace.getConfiguration(`${SECTION}.server`, scope).get<unknown>("startTimeoutSeconds");
  return startTimeoutOf(value);
}

async function failedStart(message: string, output: vscode.OutputChannel): Promise<void> {
  const choice = await vscode.window.showErrorMessage(message, SHOW_OUTPUT, OPEN_SETTINGS);
  if (choice === SHOW_OUTPUT) output.show(true);
  else if (choice === OPEN_SETTINGS) await vscode.commands.executeCommand("workbench.action.openSettings", `${SECTION}.server`);
}

/** Is `candidate` the folder `folder` or inside it? */
function isWithin(candidate: string, folder: string): boolean {
  const relative = path.relative(folder, candidate);
  return relative === "" || (!relative.startsWith("..") && !path.isAbsolute(relative));
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

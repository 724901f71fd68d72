/**
 * The agent-side Node client: starts a Context Assembly sidecar, initialises it on a workspace, and
 * offers every custom method of SPEC §8 as a typed async method returning plain JSON.
 *
 *     const client = await ContextAssemblyClient.start({ workspace: "path/to/workspace" });
 *     const context = await client.assemble(request, { onEvent: (e) => console.log(e.method) });
 *     await client.memory.write("kv://prefs/theme", { dark: true });
 *     await client.dispose();
 */

import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { statSync } from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

import {
  CancellationTokenSource,
  createMessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  type CancellationToken,
  type MessageConnection,
} from "vscode-jsonrpc/node";

import { TraceLayouts } from "./compact";
import { ContextAssemblyError, ErrorCodes } from "./errors";
import type {
  AssembledContext,
  AssemblyEvent,
  AssemblyRequest,
  CompactEvaluation,
  ContextAssemblyEvents,
  Deleted,
  EvaluationResult,
  EventResult,
  IngestionEvent,
  IngestionExecution,
  IngestionPipeline,
  IngestionTrigger,
  JsonObject,
  LlmRequest,
  LlmResponse,
  MemoryDeleteResult,
  MemoryListItem,
  MemoryReadResult,
  MemoryType,
  MemoryWriteResult,
  PersistentMemoryDefinition,
  PipelineExecution,
  PossibleVariable,
  ProcessorSpec,
  RequiredVariables,
  Rule,
  RuleDeleted,
  TurnEnded,
  RuleEngine,
  StepSpec,
  TraceLayout,
  ValidationResult,
} from "./types";

export const VERSION = "0.1.0";

/** The command started when `start()` is given none: `context-assembly serve`. */
export const DEFAULT_COMMAND: readonly string[] = ["context-assembly", "serve"];

const ASSEMBLY_EVENTS = "contextAssembly/";
const INGESTION_EVENTS = "memoryIngestion/";
const STDERR_KEEP = 64 * 1024; // how much of the sidecar's stderr `stderr` keeps (its tail)
const EXIT_WAIT_MS = 1000; // a call failing on a lost connection waits this long for the exit status
const UNINITIALIZED_GRACE_MS = 500; // a sidecar that never answered `initialize`: input ended → killed

/**
 * Answers the server's `llm/complete` requests: the sidecar holds no API keys, the agent runs the model.
 * Return `{ text }` (or just the text). `signal` aborts when the server gives up on the answer.
 */
export type LlmCallback = (
  request: LlmRequest,
  context: { signal: AbortSignal },
) => LlmResponse | string | Promise<LlmResponse | string>;

/** A notification handler for `on()`. */
export type EventHandler<P = unknown, M extends string = string> = (params: P, method: M) => void | Promise<void>;

export interface StartOptions {
  /** The workspace root: the folder holding `.codebolt/`. */
  workspace: string;
  /**
   * The program to start, or the whole command line as an array (`["python", "-m", "context_assembly",
   * "serve"]`). Default: `context-assembly serve`.
   */
  command?: string | readonly string[];
  /** Arguments after `command`. Default: `["serve"]` with the default command, otherwise none. */
  args?: readonly string[];
  /** Extra environment variables for the sidecar (merged over this process's environment). */
  env?: { [name: string]: string | undefined };
  /** Offer `llm/complete` to the server (`initializationOptions.llm = true`) and answer it with this. */
  llm?: LlmCallback;
  /** Overrides of `.codebolt/context-assembly.json` (`initializationOptions.settings`). */
  settings?: JsonObject;
  /**
   * The sidecar's stderr (its log): `"pipe"` (default) keeps the last 64 KiB in `client.stderr` and puts
   * it in start-up errors; `"inherit"` shows it on this process's stderr; `"ignore"` drops it.
   */
  stderr?: "pipe" | "inherit" | "ignore";
  /** How long start-up (`initialize`) and shutdown may take, in ms. Default 30000. */
  timeoutMs?: number;
}

/** Options of every call that may take long: an `AbortSignal` cancels it (`$/cancelRequest`). */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface EvaluateOptions extends CallOptions {
  /**
   * Ask for `trace_format: "compact"` and expand the answer here (each engine's layout fetched once per
   * engine version): the same answer as without, much less to encode, send and decode.
   */
  compactTrace?: boolean;
}

export interface AssembleOptions extends CallOptions {
  /** This assembly's notifications (started, rulesEvaluated, pipelineComplete…, complete or error), all before the call returns. */
  onEvent?: (event: AssemblyEvent) => void;
}

export interface IngestionRunOptions extends CallOptions {
  trigger?: IngestionTrigger | string;
  scope_variables?: JsonObject;
  additional_variables?: JsonObject;
  /** Sent again with the same key after a lost answer, the run happens once (the retry answers it, `duplicate: true`). */
  idempotency_key?: string;
  /** The `memoryIngestion/*` notifications of this run. */
  onEvent?: (event: IngestionEvent) => void;
}

export interface EventOptions extends CallOptions {
  scope_variables?: JsonObject;
  additional_variables?: JsonObject;
  /** Sent again with the same key after a lost answer, each pipeline runs once. */
  idempotency_key?: string;
  /** The `memoryIngestion/*` notifications of the runs the event starts. */
  onEvent?: (event: IngestionEvent) => void;
}

/** How the sidecar ended. */
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Route {
  prefix: string;
  key?: string;
  value?: unknown;
  listener: (event: { method: string; params: unknown }) => void;
}

type Params = object | undefined;

function present(values: { [key: string]: unknown }): JsonObject {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as JsonObject;
}

function isObject(value: unknown): value is { [key: string]: unknown } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** vscode-jsonrpc's own codes for a connection that is gone: PendingResponseRejected, MessageWriteError, ConnectionInactive. */
const TRANSPORT_CODES = new Set<number>([ErrorCodes.ConnectionClosed, -32099, -32096]);

/** A JSON-RPC error (or anything else thrown by the transport) as a ContextAssemblyError. */
function toError(error: unknown, lost?: () => ContextAssemblyError | undefined): ContextAssemblyError {
  if (error instanceof ContextAssemblyError) {
    return error;
  }
  if (error instanceof ResponseError) {
    if (TRANSPORT_CODES.has(error.code)) {
      return lost?.() ?? new ContextAssemblyError(error.code, "the connection to the sidecar is closed");
    }
    return new ContextAssemblyError(error.code, error.message, error.data);
  }
  const message = error instanceof Error ? error.message : String(error);
  return lost?.() ?? new ContextAssemblyError(ErrorCodes.ConnectionClosed, message);
}

function cancelled(reason: unknown): ContextAssemblyError {
  const why = reason instanceof Error ? reason.message : typeof reason === "string" ? reason : undefined;
  return new ContextAssemblyError(ErrorCodes.Cancelled, why ? `the request was cancelled: ${why}` : "the request was cancelled");
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
const TIMED_OUT = Symbol("timed out");

class Family {
  constructor(
    protected readonly client: ContextAssemblyClient,
    protected readonly prefix: string,
  ) {}

  protected call<T>(name: string, params: Params = {}, options?: CallOptions): Promise<T> {
    return this.client.request<T>(this.prefix + name, params, options);
  }

  protected async items<T>(name: string, params: Params = {}): Promise<T[]> {
    return (await this.call<{ items: T[] }>(name, params)).items;
  }
}

/** `contextRuleEngine/*`: rule engines in `.codebolt/context-rule-engines/`. */
export class RuleEngines extends Family {
  constructor(client: ContextAssemblyClient) {
    super(client, "contextRuleEngine/");
  }
  /** Every rule engine, sorted by id. */
  list(): Promise<RuleEngine[]> {
    return this.items("list");
  }
  get(id: string): Promise<RuleEngine> {
    return this.call("get", { id });
  }
  /** Store a new engine; ids are generated for it and its rules when missing. Conflict when the id exists. */
  create(engine: RuleEngine): Promise<RuleEngine> {
    return this.call("create", engine);
  }
  /** Merge top-level keys into an engine. */
  update(id: string, updates: Partial<RuleEngine>): Promise<RuleEngine> {
    return this.call("update", { id, updates });
  }
  delete(id: string): Promise<Deleted> {
    return this.call("delete", { id });
  }
  addRule(engineId: string, rule: Rule): Promise<Rule> {
    return this.call("addRule", { engine_id: engineId, rule });
  }
  updateRule(engineId: string, ruleId: string, updates: Partial<Rule>): Promise<Rule> {
    return this.call("updateRule", { engine_id: engineId, rule_id: ruleId, updates });
  }
  deleteRule(engineId: string, ruleId: string): Promise<RuleDeleted> {
    return this.call("deleteRule", { engine_id: engineId, rule_id: ruleId });
  }
  /** Evaluate one engine (enabled or not) or, without `engineId`, every enabled one. */
  evaluate(request: AssemblyRequest, engineId?: string, options: EvaluateOptions = {}): Promise<EvaluationResult> {
    const params = engineId === undefined ? request : { ...request, id: engineId };
    return this.client.evaluated(this.prefix + "evaluate", params, options);
  }
  /** The static layout a compact answer of engine `id` refers to (Conflict when `layout` is no longer current). */
  traceLayout(id: string, layout?: string): Promise<TraceLayout> {
    return this.call("traceLayout", layout === undefined ? { id } : { id, layout });
  }
  /** Every variable a rule or a memory definition reads, with where it is used. */
  possibleVariables(): Promise<PossibleVariable[]> {
    return this.items("possibleVariables");
  }
  /**
   * Validate a draft engine (not saved). With `document.uri` (the draft's file) or `document.text` the
   * problems carry LSP ranges; `{}` with a `uri` validates that document as the editor (or the disk) has it.
   */
  validate(draft: RuleEngine, document: { uri?: string; text?: string } = {}): Promise<ValidationResult> {
    return this.call("validate", { ...draft, ...present(document) });
  }
}

/** `persistentMemory/*`: retrieval pipelines in `.codebolt/PersistentMemory/`. */
export class PersistentMemory extends Family {
  constructor(client: ContextAssemblyClient) {
    super(client, "persistentMemory/");
  }
  list(): Promise<PersistentMemoryDefinition[]> {
    return this.items("list");
  }
  get(id: string): Promise<PersistentMemoryDefinition> {
    return this.call("get", { id });
  }
  create(definition: PersistentMemoryDefinition): Promise<PersistentMemoryDefinition> {
    return this.call("create", definition);
  }
  update(id: string, updates: Partial<PersistentMemoryDefinition>): Promise<PersistentMemoryDefinition> {
    return this.call("update", { id, updates });
  }
  delete(id: string): Promise<Deleted> {
    return this.call("delete", { id });
  }
  validate(definition: PersistentMemoryDefinition): Promise<ValidationResult> {
    return this.call("validate", definition);
  }
  /** Run one definition's pipeline for a request, outside any assembly. */
  execute(id: string, request: AssemblyRequest, options?: CallOptions): Promise<PipelineExecution> {
    return this.call("execute", { id, request }, options);
  }
  /** The pipeline step types and their parameters. */
  stepSpecs(): Promise<StepSpec[]> {
    return this.items("stepSpecs");
  }
}

/** `memoryIngestion/*`: the write path, pipelines in `.codebolt/MemoryIngestion/`. */
export class Ingestion extends Family {
  constructor(client: ContextAssemblyClient) {
    super(client, "memoryIngestion/");
  }
  /** Every pipeline (only the active ones with `activeOnly`). */
  list(activeOnly = false): Promise<IngestionPipeline[]> {
    return this.items("list", { active_only: activeOnly });
  }
  get(id: string): Promise<IngestionPipeline> {
    return this.call("get", { id });
  }
  create(pipeline: IngestionPipeline): Promise<IngestionPipeline> {
    return this.call("create", pipeline);
  }
  update(id: string, updates: Partial<IngestionPipeline>): Promise<IngestionPipeline> {
    return this.call("update", { id, updates });
  }
  delete(id: string): Promise<Deleted> {
    return this.call("delete", { id });
  }
  validate(pipeline: IngestionPipeline): Promise<ValidationResult> {
    return this.call("validate", pipeline);
  }
  /** Run one pipeline on a payload (trigger `manual` unless given); `onEvent` gets this pipeline's notifications. */
  execute(id: string, payload?: unknown, options: IngestionRunOptions = {}): Promise<IngestionExecution> {
    const { onEvent, signal, trigger, scope_variables, additional_variables, idempotency_key } = options;
    const params = present({ id, payload, trigger, scope_variables, additional_variables, idempotency_key });
    return this.client.routed(INGESTION_EVENTS, "pipeline_id", id, onEvent, () =>
      this.call<IngestionExecution>("execute", params, { signal }),
    );
  }
  activate(id: string): Promise<IngestionPipeline> {
    return this.call("activate", { id });
  }
  disable(id: string): Promise<IngestionPipeline> {
    return this.call("disable", { id });
  }
  /** The processor types and their parameters. */
  processorSpecs(): Promise<ProcessorSpec[]> {
    return this.items("processorSpecs");
  }
}

/** `memory/*`: the stores by SPEC §5.1 URI (`kv://`, `markdown://`, `log://`, …) and the event bus. */
export class Memory extends Family {
  constructor(client: ContextAssemblyClient) {
    super(client, "memory/");
  }
  read(uri: string): Promise<MemoryReadResult> {
    return this.call("read", { uri });
  }
  /** `idempotencyKey`: an append (`log://`, `episodic://`) sent again with it lands once (`duplicate: true`). */
  write(uri: string, value: unknown, idempotencyKey?: string): Promise<MemoryWriteResult> {
    return this.call("write", idempotencyKey === undefined ? { uri, value } : { uri, value, idempotency_key: idempotencyKey });
  }
  /** `log://` URIs are append-only: deleting one is an error. */
  delete(uri: string): Promise<MemoryDeleteResult> {
    return this.call("delete", { uri });
  }
  /** Every item under a URI prefix. */
  list(prefix: string): Promise<MemoryListItem[]> {
    return this.items("list", { prefix });
  }
  /** An application event (`onTaskCompleted`, …): every matching active ingestion pipeline runs. */
  event(trigger: IngestionTrigger | string, payload?: unknown, options: EventOptions = {}): Promise<EventResult> {
    const { onEvent, signal, scope_variables, additional_variables, idempotency_key } = options;
    const params = present({ trigger, payload, scope_variables, additional_variables, idempotency_key });
    return this.client.routed(INGESTION_EVENTS, undefined, undefined, onEvent, () =>
      this.call<EventResult>("event", params, { signal }),
    );
  }
}

/** A running sidecar, initialised on one workspace. Create it with `ContextAssemblyClient.start()`. */
export class ContextAssemblyClient {
  readonly workspace: string;
  readonly ruleEngines: RuleEngines;
  /** The compact answers' layouts seen, the latest per engine (see `expandTrace`). */
  readonly traceLayouts = new TraceLayouts();
  readonly persistentMemory: PersistentMemory;
  readonly ingestion: Ingestion;
  readonly memory: Memory;
  /** The `initialize` result. */
  initializeResult: JsonObject = {};
  /** Resolves when the sidecar process has exited. */
  readonly exited: Promise<ExitStatus>;

  private readonly process: ChildProcess;
  private readonly connection: MessageConnection;
  private readonly timeoutMs: number;
  private readonly handlers = new Map<string, Set<EventHandler<any, any>>>();
  private readonly routes = new Set<Route>();
  private exitStatus: ExitStatus | undefined;
  private stderrTail = "";
  private spawnError: Error | undefined;
  private closed = false;
  private closing: Promise<ExitStatus> | undefined;
  private initialized = false;

  /** Spawn the sidecar and initialise it on `options.workspace` (`initialize` + `initialized`). */
  static async start(options: StartOptions): Promise<ContextAssemblyClient> {
    const client = new ContextAssemblyClient(options);
    try {
      await client.initialize(options);
    } catch (error) {
      await client.shutdown().catch(() => undefined);
      throw error;
    }
    return client;
  }

  private constructor(options: StartOptions) {
    this.workspace = path.resolve(options.workspace);
    let isDir = false;
    try {
      isDir = statSync(this.workspace).isDirectory();
    } catch {
      isDir = false;
    }
    if (!isDir) {
      throw new Error(`the workspace ${JSON.stringify(this.workspace)} is not a directory`);
    }
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const [program, ...args] = commandLine(options);
    const stderr = options.stderr ?? "pipe";
    this.process = spawn(program, args, {
      cwd: this.workspace,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", stderr],
      windowsHide: true,
    });
    this.exited = new Promise<ExitStatus>((resolve) => {
      this.process.once("exit", (code, signal) => {
        this.exitStatus = { code, signal };
        resolve(this.exitStatus);
      });
      this.process.once("error", (error) => {
        this.spawnError = error; // e.g. ENOENT: the command does not exist; no "exit" follows
        if (this.process.pid === undefined) {
          this.exitStatus = { code: null, signal: null };
          resolve(this.exitStatus);
        }
        this.closeConnection();
      });
    });
    this.process.stdin!.on("error", () => undefined); // EPIPE once the sidecar is gone: calls fail instead
    this.process.stderr?.setEncoding("utf8");
    this.process.stderr?.on("data", (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_KEEP);
    });
    this.process.once("close", () => this.closeConnection());

    this.connection = createMessageConnection(
      new StreamMessageReader(this.process.stdout!),
      new StreamMessageWriter(this.process.stdin!),
    );
    this.connection.onNotification((method: string, params: unknown) => this.dispatch(method, params));
    // vscode-jsonrpc answers `$/progress` itself (for tokens it was told of): the others are ours
    this.connection.onUnhandledProgress((params) => this.dispatch("$/progress", params));
    this.connection.onClose(() => this.closeConnection());
    this.connection.onError(() => undefined); // a write to a gone sidecar: the pending call fails
    if (options.llm) {
      const llm = options.llm;
      this.connection.onRequest("llm/complete", (params: unknown, token: CancellationToken) =>
        answerLlm(llm, params as LlmRequest, token),
      );
    }
    this.connection.listen();

    this.ruleEngines = new RuleEngines(this);
    this.persistentMemory = new PersistentMemory(this);
    this.ingestion = new Ingestion(this);
    this.memory = new Memory(this);
  }

  private async initialize(options: StartOptions): Promise<void> {
    const uri = pathToFileURL(this.workspace).href;
    const llm = options.llm !== undefined;
    const initialize = this.request<JsonObject>("initialize", {
      processId: process.pid,
      clientInfo: { name: "context-assembly-typescript-client", version: VERSION },
      rootUri: uri,
      rootPath: this.workspace,
      workspaceFolders: [{ uri, name: path.basename(this.workspace) }],
      capabilities: { experimental: { contextAssembly: { llm } } },
      initializationOptions: { llm, settings: options.settings ?? {} },
    });
    const result = await withTimeout(initialize, this.timeoutMs);
    if (result === TIMED_OUT) {
      throw new ContextAssemblyError(
        ErrorCodes.Timeout,
        `the sidecar did not answer initialize within ${this.timeoutMs} ms${this.stderrNote()}`,
      );
    }
    this.initializeResult = isObject(result) ? result : {};
    this.initialized = true;
    await this.connection.sendNotification("initialized", {});
  }

  // -- the process --------------------------------------------------------------------------------

  /** The sidecar's process id. */
  get pid(): number | undefined {
    return this.process.pid;
  }

  /** The exit code once the sidecar has exited (`null` when a signal ended it), else `undefined`. */
  get exitCode(): number | null | undefined {
    return this.exitStatus?.code;
  }

  /** `initialize`'s `serverInfo` (`{name, version}`). */
  get serverInfo(): { name?: string; version?: string } {
    const info = this.initializeResult.serverInfo;
    return isObject(info) ? (info as { name?: string; version?: string }) : {};
  }

  /** The tail of the sidecar's stderr (with `stderr: "pipe"`, the default). */
  get stderr(): string {
    return this.stderrTail;
  }

  /**
   * `shutdown` + `exit`, then wait for the sidecar to end; it is killed when it has not exited within
   * `timeoutMs`. Pending calls fail with ConnectionClosed. Safe to call more than once.
   */
  shutdown(timeoutMs: number = this.timeoutMs): Promise<ExitStatus> {
    this.closing ??= this.close(timeoutMs);
    return this.closing;
  }

  /** The same as `shutdown()`. */
  dispose(): Promise<ExitStatus> {
    return this.shutdown();
  }

  private async close(timeoutMs: number): Promise<ExitStatus> {
    // a sidecar that never answered `initialize` is not asked to shut down: its input is ended and,
    // after a short grace, it is killed (asking would wait out the timeout twice more)
    const initialized = this.initialized;
    if (!initialized) {
      timeoutMs = Math.min(timeoutMs, UNINITIALIZED_GRACE_MS);
    }
    if (!this.closed && this.exitStatus === undefined && initialized) {
      try {
        const answered = await withTimeout(this.request("shutdown"), timeoutMs);
        if (answered !== TIMED_OUT) {
          await this.connection.sendNotification("exit");
        }
      } catch {
        // the sidecar is gone or refused: it is made to stop below
      }
    }
    if (!this.closed && this.exitStatus === undefined) {
      this.process.stdin?.end();
    }
    let status = await withTimeout(this.exited, timeoutMs);
    if (status === TIMED_OUT) {
      this.process.kill("SIGKILL");
      status = await this.exited;
    }
    this.closeConnection();
    return status;
  }

  private closeConnection(): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    this.connection.dispose(); // rejects pending calls with PendingResponseRejected → ConnectionClosed
  }

  /**
   * A failed call's error. When the connection is what failed, the process's exit is waited for a
   * moment (its stdout closes first), so the call the crash hit says why, as later calls do.
   */
  private async failure(error: unknown): Promise<ContextAssemblyError> {
    if (this.closed && this.exitStatus === undefined && !this.spawnError) {
      await withTimeout(this.exited, EXIT_WAIT_MS);
    }
    return toError(error, () => this.lostError());
  }

  private lostError(): ContextAssemblyError {
    let why = "the connection to the sidecar is closed";
    if (this.spawnError) {
      why = `the sidecar could not be started: ${this.spawnError.message}`;
    } else if (this.exitStatus) {
      const { code, signal } = this.exitStatus;
      why = `the sidecar exited (${signal ? `signal ${signal}` : `code ${code}`})`;
    }
    return new ContextAssemblyError(ErrorCodes.ConnectionClosed, why + this.stderrNote());
  }

  private stderrNote(): string {
    const tail = this.stderrTail.trim().split("\n").slice(-20).join("\n");
    return tail ? `\n--- sidecar stderr ---\n${tail}` : "";
  }

  // -- events -------------------------------------------------------------------------------------

  /**
   * `handler(params, method)` for every notification `method` (`"contextAssembly/complete"`, …;
   * `"*"` = every notification). Returns a function that unsubscribes.
   */
  on<K extends keyof ContextAssemblyEvents>(method: K, handler: EventHandler<ContextAssemblyEvents[K], K>): () => void;
  on(method: string, handler: EventHandler): () => void;
  on(method: string, handler: EventHandler<any, any>): () => void {
    let set = this.handlers.get(method);
    if (!set) {
      set = new Set();
      this.handlers.set(method, set);
    }
    set.add(handler);
    return () => {
      this.handlers.get(method)?.delete(handler);
    };
  }

  /** Push new settings overrides (`workspace/didChangeConfiguration`, section `contextAssembly`). */
  async setSettings(settings: JsonObject): Promise<void> {
    await this.connection.sendNotification("workspace/didChangeConfiguration", {
      settings: { contextAssembly: settings },
    });
  }

  private dispatch(method: string, params: unknown): void {
    for (const route of [...this.routes]) {
      if (
        method.startsWith(route.prefix) &&
        (route.key === undefined || (isObject(params) && params[route.key] === route.value))
      ) {
        guard(() => route.listener({ method, params }), method);
      }
    }
    for (const handler of [...(this.handlers.get(method) ?? []), ...(this.handlers.get("*") ?? [])]) {
      guard(() => handler(params, method), method);
    }
  }

  /** @internal Run `call` with `listener` receiving the notifications under `prefix` whose `key` is `value`. */
  async routed<T, E>(
    prefix: string,
    key: string | undefined,
    value: unknown,
    listener: ((event: E) => void) | undefined,
    call: () => Promise<T>,
  ): Promise<T> {
    if (!listener) {
      return call();
    }
    const route: Route = { prefix, key, value, listener: listener as Route["listener"] };
    this.routes.add(route);
    try {
      return await call();
    } finally {
      this.routes.delete(route);
    }
  }

  // -- calls --------------------------------------------------------------------------------------

  /** Any method by name: plain JSON in and out; errors as ContextAssemblyError. */
  async request<T = unknown>(method: string, params?: object, options: CallOptions = {}): Promise<T> {
    if (this.closed) {
      throw this.lostError();
    }
    const { signal } = options;
    if (signal?.aborted) {
      throw cancelled(signal.reason);
    }
    const source = signal ? new CancellationTokenSource() : undefined;
    const args: unknown[] = params === undefined ? [] : [params];
    if (source) {
      args.push(source.token);
    }
    let pending: Promise<T>;
    try {
      pending = this.connection.sendRequest<T>(method, ...args);
    } catch (error) {
      throw toError(error, () => this.lostError());
    }
    if (!signal || !source) {
      return pending.catch(async (error: unknown) => {
        throw await this.failure(error);
      });
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        source.cancel(); // sends $/cancelRequest; the server's late answer is dropped
        reject(cancelled(signal.reason));
      };
      signal.addEventListener("abort", onAbort, { once: true });
      pending.then(
        (result) => resolve(result),
        (error: unknown) => void this.failure(error).then(reject),
      ).finally(() => {
        signal.removeEventListener("abort", onAbort);
        source.dispose();
      });
    });
  }

  /**
   * `contextAssembly/assemble`: the bounded, ranked, token-budgeted context for the next LLM call.
   * `options.onEvent` gets this assembly's notifications (matched by `assembly_id`, generated when the
   * request has none), all before this returns.
   */
  assemble(request: AssemblyRequest, options: AssembleOptions = {}): Promise<AssembledContext> {
    const params = { ...request, assembly_id: request.assembly_id ?? randomUUID().replace(/-/g, "") };
    return this.routed(ASSEMBLY_EVENTS, "assembly_id", params.assembly_id, options.onEvent, () =>
      this.request<AssembledContext>("contextAssembly/assemble", params, { signal: options.signal }),
    );
  }

  /** `contextAssembly/validate`: check a request without running it. */
  validate(request: AssemblyRequest): Promise<ValidationResult> {
    return this.request("contextAssembly/validate", request);
  }

  /** `contextAssembly/memoryTypes`: the persistent-memory definitions. */
  async memoryTypes(): Promise<MemoryType[]> {
    return (await this.request<{ items: MemoryType[] }>("contextAssembly/memoryTypes", {})).items;
  }

  /**
   * `contextAssembly/evaluateRules`: the enabled (or named) rule engines, explained per condition
   * (`request.explain`). `options.compactTrace`: asked for compactly and expanded here.
   */
  evaluateRules(request: AssemblyRequest, options: EvaluateOptions = {}): Promise<EvaluationResult> {
    return this.evaluated("contextAssembly/evaluateRules", request, options);
  }

  /**
   * A compact answer (`trace_format: "compact"`) as the full one, fetching the layouts it needs that
   * are not cached yet (`traceLayouts`); any other answer as it is. Conflict when an engine changed
   * since the answer was made.
   */
  async expandTrace(answer: CompactEvaluation | EvaluationResult): Promise<EvaluationResult> {
    const documents = await Promise.all(this.traceLayouts.missing(answer)
      .map(([engineId, key]) => this.ruleEngines.traceLayout(engineId, key)));
    for (const document of documents) {
      this.traceLayouts.add(document);
    }
    return this.traceLayouts.expand(answer);
  }

  /** @internal An evaluation method's answer, compact and expanded when asked (asked again once when an engine changed in between). */
  async evaluated(method: string, params: object, options: EvaluateOptions): Promise<EvaluationResult> {
    const { compactTrace, ...callOptions } = options;
    if (!compactTrace) {
      return this.request(method, params, callOptions);
    }
    const ask = async (): Promise<EvaluationResult> =>
      this.expandTrace(await this.request<CompactEvaluation>(method, { ...params, trace_format: "compact" }, callOptions));
    try {
      return await ask();
    } catch (error) {
      if (error instanceof ContextAssemblyError && error.code === ErrorCodes.Conflict) {
        return ask();
      }
      throw error;
    }
  }

  /** `contextAssembly/requiredVariables`: the scopes and variables the named memories need. */
  requiredVariables(memoryIds: readonly string[]): Promise<RequiredVariables> {
    return this.request("contextAssembly/requiredVariables", { memory_ids: [...memoryIds] });
  }

  /**
   * `contextAssembly/endTurn`: the turn is complete; the thread's working memory (`working://<thread>/…`)
   * is cleared, so a later read says it does not exist.
   */
  endTurn(threadId: string): Promise<TurnEnded> {
    return this.request("contextAssembly/endTurn", { thread_id: threadId });
  }
}

function commandLine(options: StartOptions): string[] {
  const { command, args } = options;
  if (command === undefined) {
    return [DEFAULT_COMMAND[0], ...(args ?? DEFAULT_COMMAND.slice(1))];
  }
  const argv = typeof command === "string" ? [command] : [...command];
  if (argv.length === 0 || !argv[0]) {
    throw new Error("the sidecar command is empty");
  }
  return [...argv, ...(args ?? [])];
}

function guard(fn: () => unknown, method: string): void {
  try {
    const result = fn();
    if (result instanceof Promise) {
      result.catch((error: unknown) => warn(error, method));
    }
  } catch (error) {
    warn(error, method);
  }
}

function warn(error: unknown, method: string): void {
  const message = error instanceof Error ? error.message : String(error);
  process.emitWarning(`a handler of ${method} failed: ${message}`, "ContextAssemblyClient");
}

async function answerLlm(llm: LlmCallback, request: LlmRequest, token: CancellationToken): Promise<LlmResponse> {
  const controller = new AbortController();
  const subscription = token.onCancellationRequested(() => controller.abort());
  try {
    const answer = await llm(request, { signal: controller.signal });
    if (typeof answer === "string") {
      return { text: answer };
    }
    if (!isObject(answer)) {
      throw new ResponseError(ErrorCodes.InternalError, "the llm callback must return { text } or a string");
    }
    return answer;
  } catch (error) {
    if (error instanceof ResponseError) {
      throw error;
    }
    if (error instanceof ContextAssemblyError) {
      throw new ResponseError(error.code, error.message, error.data);
    }
    throw new ResponseError(ErrorCodes.InternalError, error instanceof Error ? error.message : String(error));
  } finally {
    subscription.dispose();
  }
}

/**
 * The JSON shapes of the Context Assembly Server's custom methods (SPEC §3-§8).
 *
 * Wire names are kept exactly as the server sends and expects them (snake_case, dotted keys such as
 * `"scope.agent.agent_name"`): these interfaces describe plain JSON, nothing is renamed. Objects the
 * server may extend carry an index signature. The server leaves out attributes whose value is null,
 * so every nullable field is also optional.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: unknown };

// -- the assembly request (SPEC §3, §6) -------------------------------------------------------------

export type ScopeName = "swarm" | "project" | "agent" | "thread" | "task" | "user" | "org" | "orchestrator";

/** One scope's fields (`project_id`, `agent_name`, …); extra fields are allowed. */
export type ScopeFields = { [field: string]: unknown };

export type ScopeVariables = { [scope in ScopeName]?: ScopeFields };

/** One tool schema (`{name, description, parameters | input_schema, …}`): extra fields are kept. */
export interface Tool {
  name: string;
  description?: string;
  [field: string]: unknown;
}

export interface AssemblyRequest {
  scope_variables: ScopeVariables;
  additional_variables?: { [name: string]: unknown };
  input?: { text?: string | null };
  /** Persistent-memory ids or store URIs (`kv://…`, `markdown://…`, …). */
  explicit_memory?: string[];
  constraints?: { max_tokens?: number | null };
  rule_engine_ids?: string[] | null;
  thread_id?: string | null;
  /** A caller-chosen id for this assembly (1-128 letters, digits, `_`, `.`, `-`); generated when absent. */
  assembly_id?: string;
  /** The agent's system prompt: packed first, in `constraints` (critical), and counted in the budget. */
  system_prompt?: string | null;
  /** Tool schemas as the agent's model API takes them: the most relevant go to `knowledge` (high). */
  tools?: Tool[] | null;
  /** LSP progress token: `$/progress` notifications report the call's stages. */
  workDoneToken?: number | string;
  /** LSP partial-result token. */
  partialResultToken?: number | string;
  /**
   * evaluateRules / contextRuleEngine/evaluate: every rule with its per-condition trace (`"all"`, the
   * default), the matched ones with theirs (`"matched"`), or the matched ones without (`"none"`).
   */
  explain?: "all" | "matched" | "none";
  /**
   * evaluateRules / contextRuleEngine/evaluate: `"compact"` answers against static per-engine layouts
   * (`CompactEvaluation`); `evaluateRules(request, { compactTrace: true })` asks for it and expands it.
   */
  trace_format?: "full" | "compact";
}

// -- the assembled context (SPEC §6 stage 7) --------------------------------------------------------

export type SectionName =
  | "state"
  | "warnings"
  | "constraints"
  | "knowledge"
  | "history"
  | "suggestions"
  | "working_memory";

export type Priority = "critical" | "high" | "medium" | "low";

export interface ContextItem {
  id: string;
  content: string;
  memory_id?: string | null;
  source: string;
  section: SectionName | string;
  priority: Priority | string;
  score?: number | null;
  tokens: number;
  metadata: JsonObject;
}

export interface SectionTrace {
  tokens: number;
  items: number;
  truncated: boolean;
  dropped: number;
}

export interface MemoryCall {
  /** A memory id or a store URI. */
  reference: string;
  /** `"explicit"`, `"mention"` or `"rule:<engine>/<rule>"`. */
  origin: string[];
  status: "ok" | "cached" | "failed" | "timeout" | "skipped" | "missing" | "excluded" | "cancelled" | string;
  kind: "definition" | "uri" | string;
  duration_ms: number;
  items: number;
  error?: string | null;
  missing_variables: string[];
  steps: JsonObject[];
}

/** An item left out (or a conflict settled) and why. */
export interface TraceDecision {
  kind: "duplicate" | "cap" | "max_items" | "max_tokens" | "budget" | "excluded" | "conflict" | string;
  reason: string;
  item_id?: string | null;
  memory_id?: string | null;
  source?: string | null;
  section?: string | null;
  tokens?: number | null;
  by?: string | null;
}

export interface Trace {
  memory_calls: MemoryCall[];
  rules_applied: JsonObject[];
  variables_used: string[];
  missing_variables: string[];
  sections: { [section: string]: SectionTrace };
  decisions: TraceDecision[];
  /** The effective packing order of the sections. */
  section_order: string[];
  /** Stage name → duration in ms. */
  stages: { [stage: string]: number };
}

export interface AssemblyMeta {
  assembly_id: string;
  token_estimate: number;
  total_items: number;
  truncated: boolean;
  duration_ms: number;
  max_tokens?: number | null;
  tokenizer: string;
  /** The replay snapshot's path, when settings enable snapshots. */
  snapshot?: string | null;
}

export interface AssembledContext {
  /** Every section, in the fixed section order. */
  context: { [section in SectionName]: ContextItem[] } & { [section: string]: ContextItem[] };
  trace: Trace;
  meta: AssemblyMeta;
}

// -- rule evaluation (SPEC §4, §8) ------------------------------------------------------------------

export interface ConditionResult {
  result: boolean;
  field?: Json;
  operator?: Json;
  value?: Json;
  actual?: Json;
  /** On field conditions: false when the variable was absent or null. */
  present?: boolean | null;
  ignore_case?: boolean | null;
  /** `"any"`, `"all"` or `"not"` on groups, whose children are in `conditions`. */
  group?: "any" | "all" | "not" | null;
  conditions?: ConditionResult[] | null;
  error?: string | null;
}

export interface RuleResult {
  rule_id: string;
  matched: boolean;
  name?: string | null;
  priority: number;
  conditions: ConditionResult[];
  memories: string[];
  excluded: string[];
  per_source: boolean;
  error?: string | null;
}

export interface EngineResult {
  engine_id: string;
  rules: RuleResult[];
  enabled: boolean;
}

export interface Cap {
  target: string;
  max_tokens?: number | null;
  max_items?: number | null;
}

export interface Boost {
  target: string;
  weight: number;
}

export interface EvaluationDecision {
  reference: string;
  outcome: "included" | "excluded" | "kept_explicit" | string;
  rule: string;
  overridden: string[];
}

export interface EvaluationResult {
  matched_memories: string[];
  excluded_memories: string[];
  engine_results: EngineResult[];
  variables_used: string[];
  missing_variables: string[];
  caps: Cap[];
  set_priority: { [memory: string]: Priority | string };
  boost: Boost[];
  decisions: EvaluationDecision[];
  warnings: string[];
  /** Values the server derived for variables the request left out (`addVar.turn_count`). */
  derived_variables?: { [variable: string]: unknown };
}

/**
 * A compact answer (`trace_format: "compact"`): every key of the full answer but `engine_results`,
 * whose entries hold the key of the engine's layout, the indexes of its matched rules in that layout
 * and (explain all / matched) each distinct condition's outcome as base64 bits.
 */
export interface CompactEvaluation extends Omit<EvaluationResult, "engine_results"> {
  trace_format: "compact";
  explain: "all" | "matched" | "none";
  /** Each variable a condition reads that the request has, with its value (absent for `"none"`). */
  actual_values?: { [variable: string]: unknown };
  engine_results: {
    engine_id: string;
    enabled: boolean;
    trace: { layout: string; matched: number[]; outcomes?: string };
  }[];
}

/** `contextRuleEngine/traceLayout`: an engine's static layout (conditions, then rules in evaluation order). */
export interface TraceLayout {
  engine_id: string;
  layout: string;
  conditions: JsonObject[];
  rules: JsonObject[];
}

// -- definitions (SPEC §4.1, §5.2, §7) --------------------------------------------------------------

/** `{field, operator, value?, ignore_case?}`, or a group `{any: […]}`, `{all: […]}`, `{not: {…}}`. */
export type RuleCondition =
  | { field: string; operator: string; value?: Json; ignore_case?: boolean }
  | { any: RuleCondition[] }
  | { all: RuleCondition[] }
  | { not: RuleCondition };

export interface RuleActions {
  add_memories?: string[];
  exclude_memories?: string[];
  caps?: Cap[];
  set_priority?: { [memory: string]: Priority };
  boost?: Boost[];
  [key: string]: unknown;
}

export interface Rule {
  id?: string;
  name?: string;
  description?: string;
  priority?: number;
  enabled?: boolean;
  when?: RuleCondition[];
  then?: RuleActions;
  [key: string]: unknown;
}

export interface RuleEngine {
  id?: string;
  name?: string;
  description?: string;
  enabled?: boolean;
  rules?: Rule[];
  [key: string]: unknown;
}

export interface PipelineStep {
  type: string;
  alias?: string;
  [param: string]: unknown;
}

export interface PersistentMemoryDefinition {
  id?: string;
  label?: string;
  description?: string;
  version?: string;
  status?: "active" | "deprecated" | "disabled";
  inputs_scope?: ScopeName[];
  additional_variables?: { name: string; type?: string; required?: boolean; description?: string }[];
  retrieval?: { pipeline: PipelineStep[] };
  contribution?: {
    section?: SectionName;
    priority?: Priority;
    format?: string;
    max_items?: number;
    max_tokens?: number;
  };
  [key: string]: unknown;
}

export type IngestionTrigger =
  | "onConversationStart"
  | "onConversationEnd"
  | "onTaskStart"
  | "onTaskCompleted"
  | "onTaskFailure"
  | "onAction"
  | "onError"
  | "manual";

export interface IngestionProcessor {
  id?: string;
  type: string;
  input?: string;
  output?: string;
  [param: string]: unknown;
}

export interface IngestionRoute {
  from: string;
  foreach?: boolean;
  condition?: RuleCondition[];
  write_to: string;
  [key: string]: unknown;
}

export interface IngestionPipeline {
  id?: string;
  label?: string;
  description?: string;
  status?: "active" | "disabled" | string;
  trigger?: IngestionTrigger | string;
  trigger_config?: { where?: RuleCondition[]; [key: string]: unknown };
  processors?: IngestionProcessor[];
  routing?: IngestionRoute[];
  [key: string]: unknown;
}

// -- validation (SPEC §8) ---------------------------------------------------------------------------

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface ValidationProblem {
  /** A JSON pointer into the validated document. */
  path: string;
  message: string;
  code?: string;
  severity?: string;
  range?: Range;
  data?: JsonObject;
  [key: string]: unknown;
}

export interface ValidationResult {
  valid: boolean;
  errors: ValidationProblem[];
  warnings: ValidationProblem[];
}

// -- other results ----------------------------------------------------------------------------------

export interface MemoryType {
  id: string;
  label: string;
  description?: string | null;
  section: SectionName | string;
  priority: Priority | string;
  status: string;
  inputs_scope: string[];
  additional_variables: JsonObject[];
}

export interface VariableUse {
  kind: "rule" | "memory" | string;
  engine_id?: string | null;
  rule_id?: string | null;
  memory_id?: string | null;
  required?: boolean;
  [key: string]: unknown;
}

export interface PossibleVariable {
  key: string;
  kind: "scope" | "additional" | "input" | "memory" | string;
  scope?: string | null;
  name?: string | null;
  type?: string | null;
  description?: string | null;
  used_by?: VariableUse[];
  [key: string]: unknown;
}

export interface RequiredVariables {
  memory_ids: string[];
  scopes: string[];
  variables: PossibleVariable[];
  unknown_memory_ids: string[];
  [key: string]: unknown;
}

/** `contextAssembly/endTurn`: the thread's working memory is cleared (seed 002). */
export interface TurnEnded {
  thread_id: string;
  /** How many working-memory entries of the thread were removed; absent for a token that may
   * write the thread but not read it (the count would tell it what the thread held). */
  cleared?: number;
}

export interface Deleted {
  id: string;
  deleted: true;
}

export interface RuleDeleted {
  engine_id: string;
  rule_id: string;
  deleted: true;
}

export interface ExecutedStep {
  type: string;
  alias?: string | null;
  duration_ms: number;
  count: number;
  [key: string]: unknown;
}

/** `persistentMemory/execute`: the items one pipeline yields, with per-step timings. */
export interface PipelineExecution {
  items: ContextItem[];
  steps: ExecutedStep[];
  status?: string;
  [key: string]: unknown;
}

export interface StepParam {
  name: string;
  schema: Json;
  description?: string | null;
  required: boolean;
  default: Json;
}

export interface StepSpec {
  name: string;
  group: string;
  description: string;
  params: StepParam[];
  one_of: Json[];
  example: Json;
  reads: Json;
}

export interface ProcessorSpec {
  name: string;
  description: string;
  uses_llm: boolean;
  /** The common processor parameters (`id`, `input`, `output`, …) first, then the type's own. */
  params: StepParam[];
  example: Json;
}

export interface ProcessorRun {
  id: string;
  type: string;
  status: "ok" | "skipped" | "failed" | string;
  duration_ms: number;
  count?: number;
  error?: string;
  warning?: string;
  [key: string]: unknown;
}

export interface RouteRun {
  from?: string;
  write_to?: string;
  written: string[];
  [key: string]: unknown;
}

/** One run of an ingestion pipeline (also recorded in the event log). */
export interface IngestionExecution {
  execution_id: string;
  pipeline_id: string;
  trigger: string;
  status: "ok" | "skipped" | "failed" | "cancelled" | string;
  processors: ProcessorRun[];
  routes: RouteRun[];
  warnings: string[];
  duration_ms: number;
  error?: string;
  /** The key the run was sent with. */
  idempotency_key?: string;
  /** A retry of a run that had ended ok: its recorded result; nothing ran again. */
  duplicate?: true;
}

/** `memory/event`: every matching active pipeline's run. */
export interface EventResult {
  trigger: string;
  executions: IngestionExecution[];
  skipped: Json[];
  [key: string]: unknown;
}

export interface MemoryReadResult {
  uri: string;
  exists: boolean;
  value: Json;
}

export interface MemoryWriteResult {
  uri: string;
  written: true;
  /** An append sent again with its idempotency key: nothing was appended. */
  duplicate?: true;
}

export interface MemoryDeleteResult {
  uri: string;
  deleted: boolean;
}

export interface MemoryListItem {
  uri: string;
  [key: string]: unknown;
}

// -- notifications (SPEC §8) ------------------------------------------------------------------------

export interface AssemblyStartedEvent {
  assembly_id: string;
  thread_id?: string | null;
}

export interface ResolvedReference {
  reference: string;
  origin: string[];
  kind: string;
}

export interface RulesEvaluatedEvent {
  assembly_id: string;
  matched_memories: string[];
  resolved: ResolvedReference[];
}

export interface PipelineCompleteEvent {
  assembly_id: string;
  memory_id: string;
  status: MemoryCall["status"];
  items: number;
  duration_ms: number;
  error?: string;
}

export interface AssemblyCompleteEvent {
  assembly_id: string;
  meta: AssemblyMeta;
}

export interface AssemblyErrorEvent {
  assembly_id: string;
  message: string;
  code: number;
  [key: string]: unknown;
}

export interface ExecutionStartedEvent {
  execution_id: string;
  pipeline_id: string;
  trigger: string;
}

export interface ProcessorCompletedEvent {
  execution_id: string;
  pipeline_id: string;
  processor_id: string;
  type: string;
  status: string;
  duration_ms: number;
  count: number;
}

export interface ExecutionCompletedEvent {
  execution_id: string;
  pipeline_id: string;
  trigger: string;
  status: string;
  duration_ms: number;
  processors: number;
  routes: number;
  written: number;
  warnings: number;
  error?: string;
}

/** Notification name → its params. */
export interface ContextAssemblyEvents {
  "contextAssembly/started": AssemblyStartedEvent;
  "contextAssembly/rulesEvaluated": RulesEvaluatedEvent;
  "contextAssembly/pipelineComplete": PipelineCompleteEvent;
  "contextAssembly/complete": AssemblyCompleteEvent;
  "contextAssembly/error": AssemblyErrorEvent;
  "memoryIngestion/executionStarted": ExecutionStartedEvent;
  "memoryIngestion/processorCompleted": ProcessorCompletedEvent;
  "memoryIngestion/executionCompleted": ExecutionCompletedEvent;
}

export type AssemblyEventName = Extract<keyof ContextAssemblyEvents, `contextAssembly/${string}`>;
export type IngestionEventName = Extract<keyof ContextAssemblyEvents, `memoryIngestion/${string}`>;

/** A notification as a per-call `onEvent` receives it: `method` tells which params these are. */
export type AssemblyEvent = { [K in AssemblyEventName]: { method: K; params: ContextAssemblyEvents[K] } }[AssemblyEventName];
export type IngestionEvent = {
  [K in IngestionEventName]: { method: K; params: ContextAssemblyEvents[K] };
}[IngestionEventName];

// -- llm/complete (SPEC §7) -------------------------------------------------------------------------

/** What the server asks the client's model to do. */
export interface LlmRequest {
  prompt: string;
  system?: string;
  /** A JSON Schema the answer should follow, when the step wants structured output. */
  schema?: Json;
  [key: string]: unknown;
}

export interface LlmResponse {
  text: string;
  [key: string]: unknown;
}

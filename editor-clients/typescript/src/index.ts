/** `@context-assembly/client`: the Node client of the Context Assembly Server sidecar (SPEC §8). */

export {
  ContextAssemblyClient,
  DEFAULT_COMMAND,
  Ingestion,
  Memory,
  PersistentMemory,
  RuleEngines,
  VERSION,
} from "./client";
export type {
  AssembleOptions,
  CallOptions,
  EvaluateOptions,
  EventHandler,
  EventOptions,
  ExitStatus,
  IngestionRunOptions,
  LlmCallback,
  StartOptions,
} from "./client";
export { LayoutError, TraceLayouts } from "./compact";
export { ContextAssemblyError, ErrorCodes } from "./errors";
export type { ErrorCode, ErrorEntry } from "./errors";
export type * from "./types";

/** Errors of the Context Assembly Server (SPEC §8) as one class with the JSON-RPC `code` and `data`. */

/** The JSON-RPC error codes the server answers with, and the ones this client raises itself. */
export const ErrorCodes = {
  /** The request is malformed: `data.errors` lists every problem as `{path, message}`. */
  InvalidParams: -32602,
  MethodNotFound: -32601,
  InternalError: -32603,
  /** No definition, rule or engine with that id. */
  NotFound: -32001,
  /** An id that already exists (create). */
  Conflict: -32003,
  /** The token presented does not allow this call (a shared sidecar with tokens). */
  Forbidden: -32004,
  /** A pipeline or an `llm/complete` took too long. */
  Timeout: -32005,
  /** A store could not be read or written. */
  Storage: -32006,
  /** The call was cancelled (an aborted `signal`, LSP RequestCancelled). */
  Cancelled: -32800,
  /** The sidecar went away (exited, closed its output, or the client was disposed) before answering. */
  ConnectionClosed: -32097,
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** One problem of an InvalidParams error: where (a JSON pointer) and what. */
export interface ErrorEntry {
  path: string;
  message: string;
  [key: string]: unknown;
}

const NAMES: { [code: number]: string } = Object.fromEntries(
  Object.entries(ErrorCodes).map(([name, code]) => [code, name]),
);

/** A failed call: `code` is the JSON-RPC error code (see `ErrorCodes`), `data` what the server attached. */
export class ContextAssemblyError extends Error {
  readonly code: number;
  readonly data: { [key: string]: unknown };

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "ContextAssemblyError";
    this.code = code;
    this.data = isObject(data) ? (data as { [key: string]: unknown }) : data === undefined || data === null ? {} : { value: data };
  }

  /** The name of the code (`"NotFound"`, `"InvalidParams"`, …), or `undefined` for another code. */
  get kind(): string | undefined {
    return NAMES[this.code];
  }

  /** InvalidParams: every problem with its JSON path (`data.errors`); otherwise empty. */
  get errors(): ErrorEntry[] {
    const errors = this.data.errors;
    return Array.isArray(errors) ? (errors as ErrorEntry[]) : [];
  }

  get isInvalidParams(): boolean {
    return this.code === ErrorCodes.InvalidParams;
  }
  get isNotFound(): boolean {
    return this.code === ErrorCodes.NotFound;
  }
  get isConflict(): boolean {
    return this.code === ErrorCodes.Conflict;
  }
  get isTimeout(): boolean {
    return this.code === ErrorCodes.Timeout;
  }
  get isStorage(): boolean {
    return this.code === ErrorCodes.Storage;
  }
  get isCancelled(): boolean {
    return this.code === ErrorCodes.Cancelled;
  }
}

function isObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

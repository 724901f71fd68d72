/**
 * What the extension answers to the server's `workspace/configuration` request for the section
 * `contextAssembly` (no `vscode` import).
 *
 * The server layers its settings: `.codebolt/context-assembly.json` first, then what the client
 * answers. VS Code always has a value for a contributed setting (its default), so forwarding every
 * value would silently override the workspace file with VS Code's defaults. Only settings the user
 * has set (user, workspace or folder level) are forwarded, renamed to the server's snake_case keys;
 * the client-side settings (`server.*`, `trace.*`) are never sent.
 */

export const SECTION = "contextAssembly";

/** VS Code key (below `contextAssembly.`) → server key (dotted = nested object). */
export const FORWARDED: ReadonlyArray<readonly [string, string]> = [
  ["maxTokens", "max_tokens"], // 0 = no budget: see `serverValue`
  ["tokenizer", "tokenizer"],
  ["pipelineTimeoutMs", "pipeline_timeout_ms"],
  ["cacheTtlS", "cache_ttl_s"],
  ["snapshots", "snapshots"],
  ["stores.backend", "stores.backend"],
  ["diagnosticsDebounceMs", "diagnostics_debounce_ms"],
];

/** The shape of `WorkspaceConfiguration.inspect()` that matters here. */
export interface Inspected {
  readonly defaultValue?: unknown;
  readonly globalValue?: unknown;
  readonly workspaceValue?: unknown;
  readonly workspaceFolderValue?: unknown;
}

/** The value the user set, most specific level first; undefined when only the default applies. */
export function explicitValue(inspected: Inspected | undefined): unknown {
  if (inspected === undefined) return undefined;
  for (const value of [inspected.workspaceFolderValue, inspected.workspaceValue, inspected.globalValue]) {
    if (value !== undefined) return value; // an explicit `null` (e.g. maxTokens: no budget) counts
  }
  return undefined;
}

/**
 * A setting's value in the server's terms. VS Code drops a `null` written in settings.json (its
 * `inspect()` reports nothing), so "no budget" cannot be `null` there: `maxTokens: 0` stands for it.
 */
export function serverValue(vscodeKey: string, value: unknown): unknown {
  return vscodeKey === "maxTokens" && value === 0 ? null : value;
}

/** The `contextAssembly` section as the server expects it, from the user's explicit values. */
export function serverSettings(explicit: (vscodeKey: string) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [vscodeKey, serverKey] of FORWARDED) {
    const value = explicit(vscodeKey);
    if (value === undefined) continue;
    const parts = serverKey.split(".");
    let target = out;
    for (const part of parts.slice(0, -1)) {
      const next = target[part];
      target = (target[part] = typeof next === "object" && next !== null ? next : {}) as Record<string, unknown>;
    }
    target[parts[parts.length - 1]!] = serverValue(vscodeKey, value);
  }
  return out;
}

/** Answers one `workspace/configuration` item: our section is shaped, anything else is left to `fallback`. */
export function configurationItem(
  section: string | undefined,
  explicit: (vscodeKey: string) => unknown,
): Record<string, unknown> | undefined {
  return section === SECTION ? serverSettings(explicit) : undefined;
}

/** How long the server has to answer `initialize` unless `contextAssembly.server.startTimeoutSeconds` says. */
export const DEFAULT_START_TIMEOUT_S = 30;
/** The longest start timeout (the manifest's maximum): a timer of more than 2³¹−1 ms fires at once. */
export const MAX_START_TIMEOUT_S = 3600;

/** The start timeout a setting's value stands for: the default unless a positive number, at most the maximum. */
export function startTimeoutOf(value: unknown): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) return DEFAULT_START_TIMEOUT_S;
  return Math.min(value, MAX_START_TIMEOUT_S);
}

/** Does a changed VS Code setting mean the server has to be started again (another command)? */
export const RESTART_SECTIONS: readonly string[] = [`${SECTION}.server`];

/**
 * How the extension finds the server (no `vscode` import, so it runs under plain Node in tests).
 *
 * Order:
 *   1. `contextAssembly.server.command` — the full command line (array, or a string split like a shell);
 *   2. `contextAssembly.server.python`  — `<python> -m context_assembly serve`;
 *   3. the active environment of the Python extension (`ms-python.python`, looked up at run time),
 *      when `context_assembly` can be imported there;
 *   4. `context-assembly` on PATH        — `context-assembly serve`.
 */

import * as path from "node:path";

/** The server is not published on a package index: it installs from a checkout or from its wheel file. */
export const INSTALL_COMMAND = "python -m pip install <checkout-or-wheel>";
export const EXECUTABLE = "context-assembly";
export const MODULE = "context_assembly";

export type CommandSource = "setting:command" | "setting:python" | "python-extension" | "path";

export interface ServerCommand {
  readonly command: string;
  readonly args: readonly string[];
  readonly source: CommandSource;
}

export type Resolution =
  | { readonly ok: true; readonly server: ServerCommand; readonly notes: readonly string[] }
  | { readonly ok: false; readonly reason: string; readonly notes: readonly string[] };

/** The two settings that name the server, as read from the configuration (anything may be there). */
export interface ServerSettings {
  readonly command?: unknown;
  readonly python?: unknown;
}

export interface ResolveDeps {
  /** The interpreter of the Python extension's active environment; undefined when there is none. */
  activePython(): Promise<string | undefined>;
  /** Whether `python -c "import context_assembly"` succeeds. */
  hasModule(python: string): Promise<boolean>;
  /** The absolute path of an executable on PATH, or undefined. */
  which(name: string): string | undefined;
}

/**
 * Splits a command line the way a POSIX shell would for the simple cases: whitespace separates words,
 * single quotes keep everything, double quotes keep everything but `\"` and `\\`, a backslash outside
 * quotes escapes the next character. No expansion of any kind. Throws on an unterminated quote.
 */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let current = "";
  let inWord = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote === "'") {
      if (ch === "'") quote = null;
      else current += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === "\\" && (line[i + 1] === '"' || line[i + 1] === "\\")) current += line[++i];
      else current += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      inWord = true;
    } else if (ch === "\\" && i + 1 < line.length && /[\s'"\\]/.test(line[i + 1]!)) {
      // escapes a space, a quote or a backslash only: a Windows path keeps its backslashes
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(current);
      current = "";
      inWord = false;
    } else {
      current += ch;
      inWord = true;
    }
  }
  if (quote !== null) throw new Error(`unterminated ${quote} quote in ${JSON.stringify(line)}`);
  if (inWord) words.push(current);
  return words;
}

/** `contextAssembly.server.command` as words: undefined when unset or empty, an Error message when invalid. */
export function commandSetting(value: unknown): string[] | undefined | { error: string } {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") {
    if (value.trim() === "") return undefined;
    try {
      return splitCommandLine(value);
    } catch (error) {
      return { error: `contextAssembly.server.command: ${(error as Error).message}` };
    }
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return undefined;
    if (!value.every((word) => typeof word === "string") || (value[0] as string).trim() === "") {
      return { error: "contextAssembly.server.command must be an array of strings whose first word is the program" };
    }
    return [...(value as string[])];
  }
  return { error: "contextAssembly.server.command must be an array of strings or a string" };
}

export async function resolveServerCommand(settings: ServerSettings, deps: ResolveDeps): Promise<Resolution> {
  const notes: string[] = [];
  const words = commandSetting(settings.command);
  if (words !== undefined) {
    if (!Array.isArray(words)) return { ok: false, reason: words.error, notes };
    return { ok: true, server: { command: words[0]!, args: words.slice(1), source: "setting:command" }, notes };
  }

  if (typeof settings.python === "string" && settings.python.trim() !== "") {
    return { ok: true, server: pythonServer(settings.python.trim(), "setting:python"), notes };
  } else if (settings.python !== undefined && settings.python !== null && typeof settings.python !== "string") {
    return { ok: false, reason: "contextAssembly.server.python must be a string (the path of a Python interpreter)", notes };
  }

  let active: string | undefined;
  try {
    active = await deps.activePython();
  } catch (error) {
    notes.push(`the Python extension did not name an interpreter: ${(error as Error).message}`);
  }
  if (active) {
    if (await deps.hasModule(active).catch(() => false)) {
      return { ok: true, server: pythonServer(active, "python-extension"), notes };
    }
    notes.push(`the active Python environment (${active}) has no ${MODULE} module`);
  }

  const onPath = deps.which(EXECUTABLE);
  if (onPath) return { ok: true, server: { command: onPath, args: ["serve"], source: "path" }, notes };
  notes.push(`\`${EXECUTABLE}\` is not on PATH`);

  return { ok: false, reason: notFoundMessage(), notes };
}

function pythonServer(python: string, source: CommandSource): ServerCommand {
  return { command: python, args: ["-m", MODULE, "serve"], source };
}

export function notFoundMessage(): string {
  return (
    "Context Assembly: the server was not found. Install it into your Python environment with " +
    `\`${INSTALL_COMMAND}\` (a checkout of the context-assembly repository, or its ` +
    "context_assembly-<version>-py3-none-any.whl file; `pipx install` of either puts only the command on PATH), " +
    'or set "contextAssembly.server.command" (or "contextAssembly.server.python").'
  );
}

/** Human-readable command line (for the output channel and error messages). */
export function describe(server: ServerCommand): string {
  return [server.command, ...server.args].map((word) => (/^[\w@%+=:,./-]+$/.test(word) ? word : JSON.stringify(word))).join(" ");
}

export interface PathEnvironment {
  readonly PATH?: string;
  readonly Path?: string;
  readonly PATHEXT?: string;
}

/** Looks `name` up on PATH (with PATHEXT on Windows); `isExecutable` tells whether a candidate is a runnable file. */
export function findOnPath(
  name: string,
  env: PathEnvironment,
  platform: NodeJS.Platform,
  isExecutable: (candidate: string) => boolean,
): string | undefined {
  const windows = platform === "win32";
  const pathApi = windows ? path.win32 : path.posix;
  const entries = (env.PATH ?? env.Path ?? "").split(windows ? ";" : ":").filter((entry) => entry !== "");
  const extensions = windows
    ? ["", ...(env.PATHEXT ?? ".COM;.EXE;.BAT;.CMD").split(";").filter((ext) => ext !== "")]
    : [""];
  for (const entry of entries) {
    for (const ext of extensions) {
      const candidate = pathApi.join(entry.replace(/^"(.*)"$/, "$1"), name + ext);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

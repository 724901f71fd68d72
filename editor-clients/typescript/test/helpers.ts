/** Test support: a fresh copy of examples/quickstart per test, and the sidecar command from the environment. */

import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

import { ContextAssemblyClient, type AssemblyRequest, type StartOptions } from "@context-assembly/client";

/** The package folder (this file runs from build/tests/). */
export const PACKAGE_ROOT = path.resolve(__dirname, "..", "..");
export const EXAMPLE = path.resolve(PACKAGE_ROOT, "..", "..", "examples", "quickstart");

/** Runtime data the server creates inside a workspace: never copied into a test's workspace. */
const RUNTIME_DATA = new Set(["db", "kuzu", "context", ".locks"].map((name) => name.toLowerCase()));

/** `CONTEXT_ASSEMBLY_SERVER` split on spaces (default `context-assembly serve`). */
export function serverCommand(): string[] {
  const raw = process.env.CONTEXT_ASSEMBLY_SERVER?.trim() || "context-assembly serve";
  return raw.split(/\s+/);
}

/** A temporary copy of examples/quickstart, removed again by `cleanup()`. */
export function makeWorkspace(): { root: string; cleanup: () => void } {
  const parent = mkdtempSync(path.join(tmpdir(), "context-assembly-ts-"));
  const root = path.join(parent, "quickstart");
  cpSync(EXAMPLE, root, {
    recursive: true,
    filter: (source) => !(source.includes(`${path.sep}.codebolt${path.sep}`) && RUNTIME_DATA.has(path.basename(source).toLowerCase())),
  });
  return { root, cleanup: () => rmSync(parent, { recursive: true, force: true }) };
}

/** The example's request.json. */
export function exampleRequest(): AssemblyRequest {
  return JSON.parse(readFileSync(path.join(EXAMPLE, "request.json"), "utf8")) as AssemblyRequest;
}

/** Start a sidecar on `workspace` with the command under test. */
export function startClient(workspace: string, options: Partial<StartOptions> = {}): Promise<ContextAssemblyClient> {
  return ContextAssemblyClient.start({ workspace, command: serverCommand(), ...options });
}

/**
 * Run `body` with a client on a fresh workspace copy; the client is shut down (and must exit with 0)
 * and the copy removed afterwards.
 */
export async function withClient(
  body: (client: ContextAssemblyClient, workspace: string) => Promise<void>,
  options: Partial<StartOptions> = {},
): Promise<void> {
  const { root, cleanup } = makeWorkspace();
  try {
    const client = await startClient(root, options);
    try {
      await body(client, root);
    } finally {
      const status = await client.shutdown();
      if (status.code !== 0) {
        throw new Error(`the sidecar exited with ${JSON.stringify(status)}\n${client.stderr}`);
      }
    }
  } finally {
    cleanup();
  }
}

/** Is a process with this id still running? */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

export const TEST_TIMEOUT_MS = 120_000;

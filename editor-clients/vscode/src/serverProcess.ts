/**
 * The server's process, spawned by the extension itself (no `vscode` import, tested under plain Node).
 *
 * vscode-languageclient cannot stop a client that is still starting, and a process it did not get
 * to `initialize` outlives every Restart and window reload. Owning the process lets the extension
 * give the start a deadline and always end the process it started.
 */

import { execFile, spawn, type ChildProcess } from "node:child_process";

/** On POSIX the server gets a process group of its own, so that ending it ends what a wrapper
 * command (`conda run`, `poetry run`, a shell script) started too; Windows ends the tree instead. */
const OWN_GROUP = process.platform !== "win32";

export interface Launch {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd?: string;
}

/** How much of the server's standard error is kept for the message shown when it fails to start. */
export const STDERR_TAIL_CHARS = 4000;

/** A spawned server and the end of what it wrote to standard error. */
export class ServerProcess {
  private stderr = "";

  private constructor(readonly child: ChildProcess) {
    // a kill or a write to a process already gone must not become an uncaught "error" event
    child.on("error", () => undefined);
    child.stderr?.on("data", (data: Buffer | string) => {
      this.stderr = (this.stderr + data.toString()).slice(-STDERR_TAIL_CHARS);
    });
  }

  /** Spawns `launch`; rejects with a readable error when the system cannot run it (ENOENT, EACCES). */
  static start(launch: Launch): Promise<ServerProcess> {
    return new Promise((resolve, reject) => {
      const child = spawn(launch.command, [...launch.args],
        { cwd: launch.cwd, stdio: "pipe", windowsHide: true, detached: OWN_GROUP });
      const failed = (error: Error): void => reject(new Error(`could not run ${launch.command}: ${error.message}`));
      child.once("error", failed);
      child.once("spawn", () => {
        child.removeListener("error", failed);
        resolve(new ServerProcess(child));
      });
    });
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** How the process ended, in words (`exited with code 1`), or undefined while it runs. */
  get ending(): string | undefined {
    if (this.child.exitCode !== null) return `exited with code ${this.child.exitCode}`;
    if (this.child.signalCode !== null) return `was ended by ${this.child.signalCode}`;
    return undefined;
  }

  /** The last non-empty line the server wrote to standard error (its error, usually). */
  get lastErrorLine(): string | undefined {
    const lines = this.stderr.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== "");
    return lines[lines.length - 1];
  }

  /** Resolves once the process has exited (at once when it has). */
  exited(): Promise<void> {
    if (!this.alive) return Promise.resolve();
    return new Promise((resolve) => this.child.once("exit", () => resolve()));
  }

  /** Ends the process and what it started: SIGTERM, SIGKILL after `graceMs` to whatever is left;
   * resolves once they are gone (or SIGKILL was sent `graceMs` ago: a process the system cannot end
   * does not hang the caller). */
  async terminate(graceMs = 2000): Promise<void> {
    if (!this.alive && !this.groupAlive()) return;
    this.signal("SIGTERM");
    if (await until(() => !this.alive && !this.groupAlive(), graceMs)) return;
    this.signal("SIGKILL");
    await until(() => !this.alive && !this.groupAlive(), graceMs);
  }

  private signal(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    if (OWN_GROUP) {
      try {
        process.kill(-pid, signal);
      } catch {
        // the group is gone
      }
    } else if (signal === "SIGKILL") {
      execFile("taskkill", ["/pid", String(pid), "/T", "/F"], { windowsHide: true }, () => undefined);
    } else {
      this.child.kill(signal);
    }
  }

  /** Whether anything of the server's process group is left (POSIX; elsewhere: the process itself). */
  private groupAlive(): boolean {
    const pid = this.child.pid;
    if (!OWN_GROUP || pid === undefined) return this.alive;
    try {
      process.kill(-pid, 0);
      return true;
    } catch {
      return false;
    }
  }
}

/** Whether `condition` holds within `ms` (checked every 25 ms). */
async function until(condition: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!condition()) {
    if (Date.now() >= end) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return true;
}

/** Whether `promise` settles within `ms`. */
export async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The error of a start that took longer than its deadline. */
export class StartTimeout extends Error {
  constructor(readonly seconds: number) {
    super(`the server did not answer "initialize" within ${seconds} s`);
  }
}

/** `work`, or a StartTimeout once `seconds` have passed; `onLate` runs when the deadline wins. */
export async function withDeadline<T>(work: Promise<T>, seconds: number, onLate: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      onLate();
      reject(new StartTimeout(seconds));
    }, seconds * 1000);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

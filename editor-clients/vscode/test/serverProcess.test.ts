import * as assert from "node:assert/strict";
import { describe as suite, test } from "node:test";

import { ServerProcess, settlesWithin, StartTimeout, withDeadline } from "../src/serverProcess";

const NODE = process.execPath;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(condition: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!condition() && Date.now() < end) await new Promise((resolve) => setTimeout(resolve, 20));
  return condition();
}

suite("the server process", () => {
  test("a command that does not exist is a readable error, not a crash", async () => {
    await assert.rejects(ServerProcess.start({ command: "/no/such/context-assembly", args: ["serve"] }),
      /could not run \/no\/such\/context-assembly: .*ENOENT/);
  });

  test("a server that dies at start: how it ended and its last error line", async () => {
    const server = await ServerProcess.start({ command: NODE, args: ["-e",
      "console.error('Traceback (most recent call last):'); console.error('ModuleNotFoundError: No module named pygls\\n'); process.exit(3)"] });
    await server.exited();
    assert.equal(server.alive, false);
    assert.equal(server.ending, "exited with code 3");
    assert.equal(server.lastErrorLine, "ModuleNotFoundError: No module named pygls");
  });

  test("terminate ends a server that ignores SIGTERM (SIGKILL after the grace)", async () => {
    const server = await ServerProcess.start({ command: NODE, args: ["-e",
      "process.on('SIGTERM', () => {}); console.error('up'); setInterval(() => {}, 1000)"] });
    await new Promise<void>((resolve) => server.child.stderr!.once("data", () => resolve())); // handler installed
    const pid = server.child.pid!;
    const t0 = Date.now();
    await server.terminate(300);
    assert.equal(server.alive, false);
    assert.equal(server.ending, "was ended by SIGKILL");
    assert.ok(Date.now() - t0 >= 250, "SIGTERM was given its grace");
    assert.equal(alive(pid), false);
    await server.terminate(300); // twice is harmless
  });

  test("terminate of a server that honours SIGTERM does not wait for the grace", async () => {
    const server = await ServerProcess.start({ command: NODE, args: ["-e", "setInterval(() => {}, 1000)"] });
    const t0 = Date.now();
    await server.terminate(5000);
    assert.ok(Date.now() - t0 < 4000);
    assert.equal(server.ending, "was ended by SIGTERM");
  });

  test("terminate ends what a wrapper started too (its process group), not only the wrapper", async () => {
    const server = await ServerProcess.start({ command: "/bin/sh", args: ["-c", "sleep 1000 & echo $! >&2; wait"] });
    const grandchild = await new Promise<number>((resolve) =>
      server.child.stderr!.once("data", (data: Buffer) => resolve(Number(String(data).trim()))));
    assert.ok(alive(grandchild));
    await server.terminate(1000);
    assert.equal(server.alive, false);
    assert.equal(await until(() => !alive(grandchild), 3000), true, "the server the wrapper started is gone too");
  });

  test("the standard error kept is bounded", async () => {
    const server = await ServerProcess.start({ command: NODE, args: ["-e",
      "process.stderr.write('x'.repeat(100000) + '\\nlast words\\n')"] });
    await server.exited();
    await new Promise((resolve) => setTimeout(resolve, 50)); // the pipe drained
    assert.equal(server.lastErrorLine, "last words");
  });
});

suite("deadlines", () => {
  test("a start that answers in time is its answer; one that does not is a StartTimeout, after onLate", async () => {
    let late = 0;
    assert.equal(await withDeadline(Promise.resolve(7), 1, () => late++), 7);
    const never = new Promise<number>(() => undefined);
    await assert.rejects(withDeadline(never, 0.05, () => late++), (error: unknown) =>
      error instanceof StartTimeout && /did not answer "initialize" within 0.05 s/.test(error.message));
    assert.equal(late, 1);
    await assert.rejects(withDeadline(Promise.reject(new Error("boom")), 1, () => late++), /boom/);
    assert.equal(late, 1);
  });

  test("settlesWithin: a rejection counts as settled; a promise that never settles does not", async () => {
    assert.equal(await settlesWithin(Promise.reject(new Error("x")), 100), true);
    assert.equal(await settlesWithin(new Promise(() => undefined), 20), false);
  });
});

// What every Node test of the server shares: check() and its failure list, a
// server started on a free 127.0.0.1 port with its log in the work directory,
// its port read from the `listening` log line, and a run() that always stops
// the server (SIGTERM, then SIGKILL) and exits with the tests' verdict.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export const failures = [];

export function check(cond, what) {
  console.log((cond ? 'ok   ' : 'FAIL ') + what);
  if (!cond) failures.push(what);
}

// Starts mhla-server from binDir with args (after --host/--port/--device/--threads,
// which it sets); killAfterMs is a last resort so a hung server never outlives ctest.
export function startServer(binDir, work, args, killAfterMs) {
  const logPath = path.join(work, 'server.log');
  const logFd = fs.openSync(logPath, 'w');
  const proc = spawn(path.join(binDir, 'mhla-server'), ['--host', '127.0.0.1', '--port', '0',
    '--device', 'cpu', '--threads', '2', ...args], { stdio: ['ignore', 'ignore', logFd] });
  const killTimer = setTimeout(() => { proc.kill('SIGKILL'); }, killAfterMs);
  killTimer.unref();
  process.on('exit', () => { if (proc.exitCode === null) proc.kill('SIGKILL'); });
  return { proc, logPath, logFd };
}

// The server's port, as soon as it logs that it listens; throws with its log if it
// exits first (the kill timer ends a hung start).
export async function waitPort(server) {
  for (;;) {
    if (server.proc.exitCode !== null) {
      throw new Error('server exited: ' + fs.readFileSync(server.logPath, 'utf8'));
    }
    for (const line of fs.readFileSync(server.logPath, 'utf8').split('\n')) {
      if (line.includes('"event":"listening"')) return JSON.parse(line).port;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Runs main(); a crash of the test is a failure too. The server gets SIGTERM and must
// exit 0 within 15 s. Exits the process: 1 with the failures listed, else 0.
export async function run(server, main, what) {
  try {
    await main();
  } catch (e) {
    console.error(e);
    failures.push('exception: ' + e);
  } finally {
    server.proc.kill('SIGTERM');
    const exited = await Promise.race([
      new Promise((r) => server.proc.on('exit', (c) => r(c))),
      new Promise((r) => setTimeout(() => r('timeout'), 15000)),
    ]);
    if (exited === 'timeout') server.proc.kill('SIGKILL');
    check(exited === 0, `server exits 0 on SIGTERM (${exited})`);
    fs.closeSync(server.logFd);
  }
  if (failures.length) {
    console.log(`${failures.length} FAILED:\n  ${failures.join('\n  ')}`);
    process.exit(1);
  }
  console.log(`all ${what} checks passed`);
  process.exit(0);
}

// Every program the bench starts goes through here: the suites (from bench/run.ts), the probes of
// bench/probes/ (a fresh process per measurement), and the tools (psql, pgbench, wrk, bun, cc).
// One place spawns, collects the output, and on failure names the command, its exit code and its
// standard error; a probe's answer is the last line it prints, as JSON.
import { basename } from "node:path";

/** The repository's root, to name its files by their path in it. */
const ROOT = new URL("../../", import.meta.url).pathname;

/** `text` with paths inside the repository written from its root (`bench/probes/cold.ts`). */
export const inRepo = (text: string) => text.replaceAll(`file://${ROOT}`, "").replaceAll(ROOT, "");

/**
 * How to run a program: in `cwd` (default this process's), killed (SIGKILL) past `timeoutMs`
 * (`timedOut` then says so), both its outputs (true) or its stderr only passed through to the
 * terminal instead of collected.
 */
export type RunOptions = {
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  inherit?: boolean | "stderr";
};
/** How a program ended. */
export type Finished = { code: number; stdout: string; stderr: string; timedOut: boolean };

/** The programs running now, so bench/run.ts can stop them on a signal. */
export const running = new Set<Deno.ChildProcess>();

/** Runs `cmd args` to its end; never throws for an exit code (see run). */
export async function spawn(cmd: string, args: string[], opts: RunOptions = {}): Promise<Finished> {
  const stdout = opts.inherit === true ? "inherit" : "piped";
  const stderr = opts.inherit ? "inherit" : "piped";
  const { cwd, env } = opts;
  const child = new Deno.Command(cmd, { args, cwd, env, stdin: "null", stdout, stderr }).spawn();
  running.add(child);
  let timedOut = false;
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => {
    timedOut = true;
    kill(child);
  }, opts.timeoutMs);
  try {
    const [out, err] = await Promise.all([
      stdout === "piped" ? new Response(child.stdout).text() : "",
      stderr === "piped" ? new Response(child.stderr).text() : "",
    ]);
    return { code: (await child.status).code, stdout: out, stderr: err, timedOut };
  } finally {
    clearTimeout(timer);
    running.delete(child);
  }
}

/** Sends SIGKILL, quietly if the process is already gone. */
export function kill(child: Deno.ChildProcess): void {
  try {
    child.kill("SIGKILL");
  } catch { /* already gone */ }
}

/** Runs `cmd args`; its stdout, or an error naming the command, its exit code and stderr. */
export async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<string> {
  const r = await spawn(cmd, args, opts);
  if (r.code === 0 && !r.timedOut) return r.stdout;
  // Named by the program and the repository file it runs: no machine path, no URL (passwords).
  const file = args.find((a) => a.startsWith(ROOT));
  const name = inRepo([basename(cmd), file].filter(Boolean).join(" "));
  const why = r.timedOut ? `did not finish within ${opts.timeoutMs! / 1000} s` : `exit ${r.code}`;
  throw new Error(`${name}: ${why}: ${inRepo(r.stderr.trim())}`);
}

/** The last line of a program's output, parsed as JSON (it may log before its answer). */
export function lastJson<T>(stdout: string): T {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`expected a JSON line last, got: ${line.slice(0, 200)}`);
  }
}

/** A file of bench/probes/ as a path. */
export const probePath = (file: string) => new URL(`../probes/${file}`, import.meta.url).pathname;

/** Deno's command line for a probe (`flags` go before the file, e.g. --v8-flags). */
export function denoArgs(file: string, args: unknown[], flags: string[] = []): string[] {
  return ["run", "-A", "--no-lock", "--quiet", ...flags, probePath(file), ...args.map(String)];
}

/**
 * Runs a probe of bench/probes/ and returns its JSON answer: under Deno, or under `runtime` (a
 * bun or python3 binary, which takes the file as its first argument).
 */
export async function probe<T>(
  file: string,
  args: unknown[],
  opts: RunOptions & { flags?: string[]; runtime?: string } = {},
) {
  const { runtime = Deno.execPath() } = opts;
  const argv = opts.runtime
    ? [probePath(file), ...args.map(String)]
    : denoArgs(file, args, opts.flags);
  return lastJson<T>(await run(runtime, argv, opts));
}

/** A temporary directory, removed with everything in it by `await using`. */
export async function tempDir(prefix: string): Promise<{ path: string } & AsyncDisposable> {
  const path = await Deno.makeTempDir({ prefix });
  return {
    path,
    [Symbol.asyncDispose]: () => Deno.remove(path, { recursive: true }).catch(() => {}),
  };
}

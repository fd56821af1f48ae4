// For fixtures run with --v8-flags=--expose-gc: collect garbage until a promise settles.
import { poll } from "./wait.ts";

/**
 * Runs the garbage collector (and lets finalizers run) until `p` settles: true, or `ms` pass
 * first: false (what `p` waited for was never released).
 */
export async function settlesWhileCollecting(p: Promise<unknown>, ms = 10_000): Promise<boolean> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with --v8-flags=--expose-gc");
  let settled = false;
  p.then(() => settled = true, () => settled = true);
  const collected = () => {
    if (!settled) gc();
    return settled;
  };
  return await poll(collected, ms, 20) === true;
}

/**
 * Runs a fixture script with the garbage collector exposed and returns the JSON it prints.
 * Fails if it exits non-zero, and kills it after `ms` (its own waits are bounded, so a fixture
 * that runs longer hangs where it should not).
 */
export async function runWithGc(fixture: URL, args: string[], ms = 120_000): Promise<unknown> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--v8-flags=--expose-gc", fixture.pathname, ...args],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const kill = setTimeout(() => child.kill("SIGKILL"), ms);
  const out = await child.output().finally(() => clearTimeout(kill));
  const stderr = new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`${fixture.pathname} exited with ${out.code}: ${stderr}`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

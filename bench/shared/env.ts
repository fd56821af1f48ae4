// How bench/run.ts configures the suites it starts: environment variables, so each suite also
// runs on its own (`PGPIPE_BENCH_URL=postgres://... deno bench -A --no-lock bench/suites/driver.ts`).

/** The database to benchmark: PGPIPE_BENCH_URL, else DATABASE_URL. */
export function benchUrl(): string {
  const url = Deno.env.get("PGPIPE_BENCH_URL") ?? Deno.env.get("DATABASE_URL");
  if (!url) {
    throw new Error("no database: run `deno task bench`, or set PGPIPE_BENCH_URL/DATABASE_URL");
  }
  return url;
}

/** Smoke-run mode (`deno task bench --quick`): fewer iterations, same code paths. */
export function isQuick(): boolean {
  return Deno.env.get("PGPIPE_BENCH_QUICK") === "1" || Deno.args.includes("--quick");
}

/** A `--name=value` command-line flag, else an environment variable, else the default. */
export function numberFlag(name: string, envName: string, fallback: number): number {
  const arg = Deno.args.find((a) => a.startsWith(`--${name}=`));
  const text = arg?.slice(name.length + 3) ?? Deno.env.get(envName);
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value < 0) throw new Error(`invalid --${name}: ${text}`);
  return value;
}

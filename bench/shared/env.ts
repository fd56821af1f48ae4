// How bench/run.ts configures the suites it starts: environment variables, so each suite also
// runs on its own (`PGPIPE_BENCH_URL=postgres://... deno bench -A --no-lock bench/suites/driver.ts`).

/** The database to benchmark over plain TCP: PGPIPE_BENCH_URL, else DATABASE_URL. */
export function plainBenchUrl(): string {
  const url = Deno.env.get("PGPIPE_BENCH_URL") ?? Deno.env.get("DATABASE_URL");
  if (!url) {
    throw new Error("no database: run `deno task bench`, or set PGPIPE_BENCH_URL/DATABASE_URL");
  }
  return url;
}

/**
 * Whether this run is a suite's TLS variant (`--only=throughput-tls`): the same suite against
 * the same server with `sslmode=require`, as a new user connects to a managed database.
 */
export function isTls(): boolean {
  return Deno.env.get("PGPIPE_BENCH_TLS") === "1";
}

/** The same server with sslmode=require (PGPIPE_BENCH_TLS_URL, else the plain URL changed). */
export function tlsBenchUrl(): string {
  const given = Deno.env.get("PGPIPE_BENCH_TLS_URL");
  if (given) return given;
  const u = new URL(plainBenchUrl());
  u.searchParams.set("sslmode", "require");
  return u.toString();
}

/**
 * The `ssl` option for a probe given `url`: `require` when the URL asks for it (a TLS variant),
 * else none, whatever a driver's default would be.
 */
export function sslOf(url: string): "require" | false {
  return new URL(url).searchParams.get("sslmode") === "require" ? "require" : false;
}

/** The database to benchmark: the TLS URL in a TLS variant, else the plain one. */
export function benchUrl(): string {
  return isTls() ? tlsBenchUrl() : plainBenchUrl();
}

/**
 * The PEM of the CA that signed the bench server's certificate (PGPIPE_BENCH_CA names its
 * file), with which pgpipe verifies the server and so runs on Deno's native TLS.
 */
export function benchCa(): string | undefined {
  const path = Deno.env.get("PGPIPE_BENCH_CA");
  return path ? Deno.readTextFileSync(path) : undefined;
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

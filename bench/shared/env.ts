// How bench/run.ts configures the suites it starts: environment variables, so each suite also
// runs on its own (`PGPIPE_BENCH_URL=postgres://... deno run -A --no-lock bench/suites/cold.ts`).
const env = (name: string) => Deno.env.get(name);

/** The database to benchmark over plain TCP: PGPIPE_BENCH_URL, else DATABASE_URL. */
export function plainBenchUrl(): string {
  const url = env("PGPIPE_BENCH_URL") ?? env("DATABASE_URL");
  if (url) return url;
  throw new Error("no database: run `deno task bench`, or set PGPIPE_BENCH_URL/DATABASE_URL");
}

/**
 * Whether this run is a suite's TLS twin (`--only=throughput-tls`): the same suite against the
 * same server with `sslmode=require`, as a new user connects to a managed database.
 */
export const isTls = () => env("PGPIPE_BENCH_TLS") === "1";

/** The database to benchmark: in a TLS twin the same server with sslmode=require. */
export const benchUrl = () =>
  !isTls()
    ? plainBenchUrl()
    : env("PGPIPE_BENCH_TLS_URL") ?? via(plainBenchUrl(), 0, { sslmode: "require" });

/** A probe's `ssl` option for `url`: `require` when the URL asks for it, else none at all. */
export const sslOf = (url: string) =>
  new URL(url).searchParams.get("sslmode") === "require" ? "require" as const : false;

/** The PEM of the CA of the bench server's certificate (PGPIPE_BENCH_CA names the file). */
export const benchCa = () =>
  env("PGPIPE_BENCH_CA") && Deno.readTextFileSync(env("PGPIPE_BENCH_CA")!) || undefined;

/** Smoke-run mode (`deno task bench --quick`): fewer iterations, same code paths. */
export const isQuick = () => env("PGPIPE_BENCH_QUICK") === "1" || Deno.args.includes("--quick");

/** The latency proxy's one-way delay in ms: `--delay=MS`, else PGPIPE_BENCH_DELAY, else 5. */
export function proxyDelay(): number {
  const text = Deno.args.find((a) => a.startsWith("--delay="))?.slice(8) ??
    env("PGPIPE_BENCH_DELAY");
  const value = Number(text || 5);
  if (!Number.isFinite(value) || value < 0) throw new Error(`invalid --delay: ${text}`);
  return value;
}

/** A server URL's host and port, as Deno.connect takes them. */
export function hostPort(url: string): { hostname: string; port: number } {
  const u = new URL(url);
  return {
    hostname: u.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1",
    port: Number(u.port || 5432),
  };
}

/** `url` with these parameters and, given a port, host and port 127.0.0.1:port (a proxy's). */
export function via(url: string, port: number, params: Record<string, string> = {}): string {
  const u = new URL(url);
  if (port) [u.hostname, u.port] = ["127.0.0.1", String(port)];
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
  return u.toString();
}

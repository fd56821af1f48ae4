// `deno task test --pg=pglite`: the suite against an in-process PGlite instead of the test
// clusters. test/run.ts sets PGPIPE_TEST_PGLITE=1 and names a file in PGPIPE_TEST_SKIPS where
// every test skipped because its subject is not in PGlite is recorded with the reason, for the
// runner's closing summary. databaseUrl() then hands out PGLITE_URL, which the harness's
// postgres() (harness/postgres.ts) maps to a client of the shared PGlite.

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined;
  }
}

/** Whether this run is against PGlite. */
export const onPglite: boolean = readEnv("PGPIPE_TEST_PGLITE") === "1";

/** The URL databaseUrl() hands out on PGlite: its user and database are the session's. */
export const PGLITE_URL = "postgres://postgres@pglite.invalid/postgres";

/** The test file that called into the harness (from the stack), relative to test/. */
function callerFile(): string {
  for (const line of (new Error().stack ?? "").split("\n").slice(2)) {
    const m = /(file:\/\/[^\s)]+?\.ts):\d+:\d+/.exec(line);
    if (m && !m[1].includes("/test/harness/")) return m[1].replace(/^.*\/test\//, "");
  }
  return "?";
}

/** Records a test skipped on PGlite, with why (only on PGlite; never fails a test). */
export function recordSkip(name: string, reason: string, file = callerFile()): void {
  const path = readEnv("PGPIPE_TEST_SKIPS");
  if (!onPglite || !path) return;
  try {
    Deno.writeTextFileSync(path, JSON.stringify({ file, name, reason }) + "\n", { append: true });
  } catch {
    // the summary is a courtesy: a test run never fails for it
  }
}

/**
 * A test whose subject PGlite does not have (several sessions, a server process, TCP, ...):
 * registered as usual, and ignored on PGlite with `reason` recorded. The other arguments are
 * Deno.test's: a name and a function, or a definition.
 */
export function serverTest(
  reason: string,
  test: string | Deno.TestDefinition,
  fn?: (t: Deno.TestContext) => void | Promise<void>,
): void {
  const definition: Deno.TestDefinition = typeof test === "string" ? { name: test, fn: fn! } : test;
  if (onPglite) recordSkip(definition.name, reason, callerFile());
  Deno.test({ ...definition, ignore: onPglite || definition.ignore });
}

// Why a test cannot run on PGlite: what its subject needs that an in-process, one-session
// server has not.

/** Several sessions at once: a second client, a pool over `max` 1, another backend's view. */
export const SEVERAL_SESSIONS = "several sessions at once (PGlite has one)";
/** A query stopped while it runs: nothing can reach PGlite during a call. */
export const CANCEL =
  "cancelling a running query (CancelRequest, timeouts): a query handed to PGlite runs to its " +
  "end inside one call, blocking the process (pg_sleep included)";
/** The server as a process: its backends terminated, restarted, seen by pg_stat_activity. */
export const SERVER_PROCESS =
  "the server process and its backends (pg_terminate_backend, restarts, pg_stat_activity)";
/** Bytes on a network: proxies, the socket option, TCP errors. */
export const NETWORK = "TCP: proxies, sockets and the socket option (PGlite has no network)";
/** Reading or writing a large answer a piece at a time. */
export const WHOLE_ANSWERS =
  "backpressure and bounded memory: PGlite hands over each call's answer whole, and takes a " +
  "COPY's data whole";
/** What PGlite's build or settings leave out. */
export const NOT_BUILT_IN =
  "a server feature PGlite leaves out (prepared transactions: max_prepared_transactions is 0)";
/** A comparison with postgres.js, which needs a server to connect to. */
export const POSTGRES_JS_REFERENCE = "postgres.js against a server is the reference it compares to";

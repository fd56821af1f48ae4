/**
 * A request handler in Deno Deploy style: a page-hit counter.
 *
 * The module exports `handler` and `{ fetch: handler }`, the shape `deno serve` runs; an entrypoint
 * that starts the server itself calls `Deno.serve(handler)`. The client is created lazily, on the
 * first request, from `DATABASE_URL`, and then kept at module level so later requests served by
 * the same isolate reuse its connections. Without `DATABASE_URL` (trying it locally), it runs on
 * PGlite, a PostgreSQL inside the process, in memory (`--allow-read`: PGlite reads its own files).
 *
 * What it needs:
 *
 * - `DATABASE_URL`, with the password in it and TLS set by its `sslmode` parameter:
 *   `postgres://app:secret@db.example.com:5432/app?sslmode=require` (encrypted) or
 *   `?sslmode=verify-full` (encrypted, and the certificate chain and host name checked against
 *   the default root certificates).
 * - Optionally `DATABASE_CA`: the PEM text of the server's CA certificate, for a server whose
 *   certificate the default roots do not cover; then the connection is `verify-full` against it.
 *   (`?sslrootcert=` would need a file, and there is no file system here.)
 * - Outbound TCP to the database port. Nothing else: no file system, no subprocess.
 *
 * ```sh
 * deno serve --allow-net --allow-env --allow-read examples/deploy_handler.ts   # no server: PGlite
 * DATABASE_URL='postgres://app:secret@localhost:5432/app?sslmode=require' \
 *   deno serve --allow-net --allow-env examples/deploy_handler.ts
 *
 * curl -X POST localhost:8000/hits/home   # {"page":"home","hits":1}
 * curl localhost:8000/hits                # the ten most visited pages
 * curl localhost:8000/                    # server version, time and whether TLS is on
 * curl -X POST "localhost:8000/hits/a%20b" # 400: a page name is letters, digits, _ or -
 * ```
 *
 * @module
 */

// In your project: import postgres, { type Sql } from "jsr:@pgpipe/pgpipe";
import postgres, { type Sql } from "../mod.ts";
// In your project: import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
import { pglite } from "../pglite.ts";

let client: Sql | undefined;
let schema: Promise<void> | undefined;

/** The module-level client, created on first use from the environment. */
function db(): Sql {
  if (client) return client;
  const url = Deno.env.get("DATABASE_URL");
  if (!url) {
    console.log("DATABASE_URL is not set: running on PGlite, in memory");
    return client = postgres(pglite());
  }
  const ca = Deno.env.get("DATABASE_CA");
  client = postgres(url, {
    // An isolate serves few requests at a time, and each connection pipelines them.
    max: 2,
    // Let the connections go when the isolate has been quiet for a while.
    idle_timeout: 30,
    connect_timeout: 10,
    // Without DATABASE_CA, TLS follows the URL's sslmode.
    ...(ca ? { ssl: { mode: "verify-full" as const, ca } } : {}),
  });
  return client;
}

/** Creates the table once per isolate (a real application would run migrations instead). */
function ready(sql: Sql): Promise<void> {
  schema ??= (async () => {
    await sql`
      create table if not exists page_hits (
        page text primary key,
        hits int not null default 0
      )`;
  })().catch((e) => {
    schema = undefined; // try again on the next request
    throw e;
  });
  return schema;
}

/** Answers one request. */
export async function handler(req: Request): Promise<Response> {
  const url = new URL(req.url);
  let sql: Sql;
  try {
    sql = db();
  } catch (e) {
    return Response.json({ error: (e as Error).message }, { status: 500 });
  }
  try {
    if (url.pathname === "/" && req.method === "GET") {
      // Issued together: one write, one round trip.
      const [[server], [tls]] = await Promise.all([
        sql`select current_setting('server_version') as version, now() as now`,
        sql`select coalesce(
              (select ssl from pg_stat_ssl where pid = pg_backend_pid()), false) as tls`,
      ]);
      return Response.json({ version: server.version, now: server.now, tls: tls.tls });
    }
    await ready(sql);
    const segment = /^\/hits\/([^/]*)$/.exec(url.pathname)?.[1];
    const page = segment !== undefined && /^[\w-]{1,100}$/.test(segment) ? segment : undefined;
    if (segment !== undefined && page === undefined) {
      // Bad input is the client's mistake: a 400 before any query, never a 500.
      return Response.json({ error: "a page name is 1 to 100 letters, digits, _ or -" }, {
        status: 400,
      });
    }
    if (page !== undefined && req.method === "POST") {
      const [row] = await sql`
        insert into page_hits (page, hits) values (${page}, 1)
        on conflict (page) do update set hits = page_hits.hits + 1
        returning page, hits`;
      return Response.json(row);
    }
    if (page !== undefined && req.method === "GET") {
      const [row] = await sql`select page, hits from page_hits where page = ${page}`;
      return Response.json(row ?? { page, hits: 0 });
    }
    if (url.pathname === "/hits" && req.method === "GET") {
      return Response.json(
        await sql`select page, hits from page_hits order by hits desc, page limit 10`,
      );
    }
    return Response.json({ error: "not found" }, { status: 404 });
  } catch (e) {
    console.error(e);
    return Response.json({ error: "database error" }, { status: 500 });
  }
}

/**
 * Closes the client's connections and forgets it, so the next request makes a new one from the
 * environment (used by the tests; a deployed isolate simply goes away).
 */
export async function close(): Promise<void> {
  const sql = client;
  client = undefined;
  schema = undefined;
  await sql?.end();
}

export default { fetch: handler } satisfies Deno.ServeDefaultExport;

// The child of test/telemetry_test.ts: `deno run -A test/harness/telemetry_app.ts <url>`, run
// with OTEL_DENO=true exporting to the test's receiver. A Deno.serve handler per case, each
// fetched once, so every pgpipe span should sit under a request span. Prints nothing on success.
import postgres from "../../mod.ts";

const url = Deno.args[0];
const sql = postgres(url, { max: 2, fetch_types: false, onnotice: () => {} });
const untraced = postgres(url, { max: 1, fetch_types: false, telemetry: false });
const textless = postgres(url, { max: 1, fetch_types: false, telemetry: { query_text: false } });

const routes: Record<string, () => Promise<unknown>> = {
  // Three queries issued together: written in one batch on one connection, answers overlapping.
  // First: the connection is opened here, so the cases below find it open.
  "/serial": async () => {
    for (const id of [4245, 4246, 4247]) await sql`select ${id}::int as id from pg_type limit 1`;
  },
  "/pipelined": () =>
    Promise.all([
      sql`select ${4242}::int as id from pg_class limit 1`,
      sql`select ${4243}::int as id from pg_class limit 1`,
      sql`select ${4244}::int as id from pg_class limit 1`,
    ]),
  // A connection in use while metrics are exported (every 200 ms), and a query waiting for one.
  "/busy": () =>
    Promise.all([
      sql`select pg_sleep(${0.5})`,
      sql.begin((tx) => tx`select pg_sleep(${0.5})`),
      sql`select ${1}::int as waiting`,
    ]),
  "/error": () => sql`select 1 / ${0}::int as boom`.catch(() => null),
  "/transaction": () =>
    sql.begin(async (tx) => {
      await tx`select ${1}::int as a`;
      await tx`select ${2}::int as b`;
    }),
  // A transaction without a callback: its span ends at commit().
  "/using": async () => {
    await using tx = await sql.begin();
    await tx`select ${1}::int as u`;
    await tx.commit();
  },
  "/cursor": async () => {
    let rows = 0;
    for await (const batch of sql`select g from generate_series(1, 25) g`.cursor(10)) {
      rows += batch.length;
    }
    return rows;
  },
  // sql.unsafe text without parameters may hold values: no span records it, not even a cursor's
  // or a COPY's, and a parameterised run of the same text must not make it appear later.
  "/unsafe": async () => {
    const text = "select 'secret-4711' as s";
    await sql`select 'secret-4711' as s`; // the same text from the tag: recorded, by design
    await sql.unsafe(text);
    for await (const _ of sql.unsafe(text).cursor(1)) { /* drain */ }
    const stream = await sql.unsafe("copy (select 'secret-4711') to stdout").readableStream();
    for await (const _ of stream) { /* drain */ }
  },
  "/copy": async () => {
    const stream = await sql`copy (select g from generate_series(1, 7) g) to stdout`
      .readableStream();
    for await (const _ of stream) { /* drain */ }
  },
  // sql.copyFrom and sql.copyTo: one span each, with the rows copied.
  "/bulk": async () => {
    await sql`drop table if exists otel_bulk`;
    await sql`create table otel_bulk (id int, name text)`;
    await sql.copyFrom("otel_bulk", [[1, "a"], [2, "b"], [3, "c"], [4, "d"], [5, "e"]]);
    for await (const _ of sql.copyTo("otel_bulk")) { /* drain */ }
    await sql`drop table otel_bulk`;
  },
  // A cancelled query: its span gets the cancel event and the server's 57014.
  "/cancel": async () => {
    const q = sql`select pg_sleep(${5})`.execute();
    setTimeout(() => q.cancel(), 100);
    await q.catch(() => null);
  },
  // A statement that goes stale (the table changed shape): the query runs again, re-prepared.
  "/reprepare": async () => {
    await sql`drop table if exists otel_replan`;
    await sql`create table otel_replan (a int)`;
    await sql`select * from otel_replan`;
    await sql`alter table otel_replan add column b int`;
    await sql`select * from otel_replan`;
    await sql`drop table otel_replan`;
  },
  "/options": async () => {
    await untraced`select ${"untraced"}::text as u`;
    await textless`select ${"textless"}::text as t from pg_namespace limit 1`;
  },
};

const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
  const route = routes[new URL(req.url).pathname];
  if (route === undefined) return new Response("no such case", { status: 404 });
  await route();
  return new Response("ok");
});
for (const path of Object.keys(routes)) {
  const res = await fetch(`http://127.0.0.1:${server.addr.port}${path}`);
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  await res.body?.cancel();
}
// Metrics are exported every 200 ms (OTEL_METRIC_EXPORT_INTERVAL): wait for one export with
// the connections open and one after they are idle.
await new Promise((resolve) => setTimeout(resolve, 600));
await server.shutdown();
await Promise.all([sql.end(), untraced.end(), textless.end()]);
// Ended clients are no longer observed: the exports from now on carry no connection gauges.
await new Promise((resolve) => setTimeout(resolve, 700));

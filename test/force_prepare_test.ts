/**
 * `force_prepare`: queries that ask for the unnamed statement (`sql.unsafe(text, args)`,
 * `{ prepare: false }`, how ORMs' postgres.js drivers send every query) get named, cached
 * statements; never with `prepare: false`; and a named statement that vanishes (a
 * transaction-mode pooler moving the session) turns it off for the client.
 */
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { databaseUrl, plainCluster, tlsCluster } from "./harness/env.ts";
import { findPgbouncer, startPgbouncer } from "./harness/pgbouncer.ts";
import { serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";
import { quiet } from "./harness/connect.ts";

const url = databaseUrl();
const TEXT = "select $1::int * 2 as doubled";

/** The server-side name of the statement a result ran ("" for the unnamed one). */
function statementName(result: unknown): string {
  return (result as { statement: { name: string } }).statement.name;
}

serverTest(
  SEVERAL_SESSIONS,
  "force_prepare: unsafe queries and prepare: false get named, cached statements",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 1, force_prepare: true });
    assert.equal(sql.options.force_prepare, true);
    const a = await sql.unsafe(TEXT, [2], { prepare: false });
    const b = await sql.unsafe(TEXT, [3]);
    assert.deepEqual([a[0].doubled, b[0].doubled], [4, 6]);
    assert.notEqual(statementName(a), "");
    assert.equal(statementName(a), statementName(b), "the same statement, cached");
    const [{ n }] = await sql`select count(*)::int as n from pg_prepared_statements
    where statement = ${TEXT}`;
    assert.equal(n, 1);
    // Without arguments sql.unsafe stays on the simple protocol: several statements still run.
    const both = await sql.unsafe<Record<string, unknown>[][]>("select 1 as one; select 2 as two");
    assert.deepEqual(both.map((r) => ({ ...r[0] })), [{ one: 1 }, { two: 2 }]);

    await using plain = postgres(url, { ...quiet, max: 1 });
    assert.equal(plain.options.force_prepare, false);
    assert.equal(statementName(await plain.unsafe(TEXT, [2])), "", "off by default");
  },
);

serverTest(
  SEVERAL_SESSIONS,
  "force_prepare: no effect with prepare: false; read from the URL too",
  async () => {
    await using sql = postgres(url, { ...quiet, max: 1, prepare: false, force_prepare: true });
    assert.equal(sql.options.force_prepare, false);
    assert.equal(statementName(await sql.unsafe(TEXT, [2])), "");
    assert.equal(statementName(await sql`select ${1}::int as one`), "");
    const withQuery = url + (url.includes("?") ? "&" : "?") + "force_prepare=true";
    await using fromUrl = postgres(withQuery, { ...quiet, max: 1 });
    assert.equal(fromUrl.options.force_prepare, true);
    assert.notEqual(statementName(await fromUrl.unsafe(TEXT, [2])), "");
  },
);

Deno.test("force_prepare: a statement that vanished turns it off and the query runs unnamed", async () => {
  await using sql = postgres(url, { ...quiet, max: 1, force_prepare: true });
  assert.equal((await sql.unsafe(TEXT, [1]))[0].doubled, 2);
  await sql.unsafe("deallocate all"); // what a pooler handing the session elsewhere looks like
  const after = await sql.unsafe(TEXT, [5]);
  assert.equal(after[0].doubled, 10);
  assert.equal(statementName(after), "", "run again on the unnamed statement");
  assert.equal(sql.options.force_prepare, false);
  assert.equal(statementName(await sql.unsafe(TEXT, [6])), "");
  // Tagged queries keep their own named statements.
  assert.notEqual(statementName(await sql`select ${1}::int as one`), "");
});

serverTest(
  SEVERAL_SESSIONS,
  "statement names differ between connections, so a pooler's server never runs another's",
  async () => {
    await using a = postgres(url, { ...quiet, max: 1, force_prepare: true });
    await using b = postgres(url, { ...quiet, max: 1, force_prepare: true });
    const [ra, rb] = [await a.unsafe(TEXT, [1]), await b.unsafe("select $1::int + 100 as v", [1])];
    assert.notEqual(statementName(ra), "");
    assert.notEqual(statementName(ra), statementName(rb), "the first statement of each client");
  },
);

const bouncerBin = findPgbouncer();
const cluster = plainCluster() ?? tlsCluster();
if (bouncerBin === null && cluster !== undefined) {
  console.log("force_prepare_test: the PgBouncer case skipped: pgbouncer is not installed");
}

/**
 * PgBouncer in transaction mode over two server connections, and where its clients connect. No
 * fetch_types: its catalog query, pipelined behind a connection's first query, is a transaction of
 * its own that may end last and so change which server PgBouncer hands out next; these tests follow
 * which server each of their own queries gets.
 */
async function twoServerBouncer() {
  const c = cluster!;
  const user = c.users.trust.user;
  const bouncer = await startPgbouncer({
    server: { host: c.host, port: c.port },
    users: [user],
    poolSize: 2,
  });
  const target = {
    host: bouncer.host,
    port: bouncer.port,
    user,
    database: c.database,
    fetch_types: false,
  };
  return Object.assign(bouncer, { target });
}

Deno.test({
  name: "force_prepare behind PgBouncer's transaction mode: it turns off, every query is right",
  ignore: bouncerBin === null || cluster === undefined,
  async fn() {
    await using bouncer = await twoServerBouncer();
    const target = bouncer.target;
    await using sql = postgres({ ...target, ...quiet, max: 1, force_prepare: true });
    await using other = postgres({ ...target, ...quiet, max: 1, prepare: false });
    assert.equal((await sql.unsafe(TEXT, [1]))[0].doubled, 2); // prepared on server 1
    // The other client's transaction takes server 1 (PgBouncer hands out the last used
    // first), so the next query goes to a server that never saw the statement.
    await using tx = await other.begin();
    await tx`select 1`;
    const again = await sql.unsafe(TEXT, [21]);
    assert.equal(again[0].doubled, 42);
    assert.equal(sql.options.force_prepare, false, "the vanished statement turned it off");
    await tx.commit();
    const many = await Promise.all(
      Array.from({ length: 200 }, (_, i) => sql.unsafe(TEXT, [i], { prepare: false })),
    );
    assert.deepEqual(many.map((r) => r[0].doubled), Array.from({ length: 200 }, (_, i) => 2 * i));
  },
});

Deno.test({
  name:
    "force_prepare behind PgBouncer: a statement another client prepared on that server is never run",
  ignore: bouncerBin === null || cluster === undefined,
  async fn() {
    await using bouncer = await twoServerBouncer();
    const target = bouncer.target;
    await using a = postgres({ ...target, ...quiet, max: 1, force_prepare: true });
    await using b = postgres({ ...target, ...quiet, max: 1, force_prepare: true });
    await using other = postgres({ ...target, ...quiet, max: 1, prepare: false });
    const PLUS = "select $1::int + 100 as doubled, pg_backend_pid() as pid";
    {
      // `other` holds one server, so `a` prepares its statement on the other one.
      await using tx = await other.begin();
      const [{ pid: held }] = await tx`select pg_backend_pid() as pid`;
      const [first] = await a.unsafe(`${TEXT}, pg_backend_pid() as pid`, [1]);
      assert.notEqual(first.pid, held);
      await tx.commit();
    }
    // PgBouncer hands out the server used last: the one `a` never prepared on, where `b`
    // prepares its own first statement now.
    const [prepared] = await b.unsafe(PLUS, [1]);
    assert.equal(prepared.doubled, 101);
    // `a` binds its statement there: with names of its own, not found (and run again unnamed),
    // never `b`'s statement under the same name.
    const [again] = await a.unsafe(`${TEXT}, pg_backend_pid() as pid`, [5]);
    assert.equal(again.pid, prepared.pid, "a ran on the server where b prepared its statement");
    assert.equal(again.doubled, 10);
  },
});

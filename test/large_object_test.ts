/** sql.largeObject against a real server: postgres.js's 'Large object' test and the API around it. */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import postgres, { PostgresError, QueryError, type Sql } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { runWithGc } from "./harness/collect.ts";
import { serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** The bytes stored for a large object, read back outside pgpipe's large object code. */
async function stored(sql: Sql, oid: number): Promise<Buffer> {
  return (await sql`select lo_get(${oid}::int8::oid) as data`)[0].data;
}

Deno.test("postgres.js 'Large object': a file piped into writable() reads back with the same md5", async () => {
  await using sql = postgres(url, quiet);
  const file = new URL("../README.md", import.meta.url).pathname;
  const md5 = createHash("md5").update(readFileSync(file)).digest("hex");

  const lo = await sql.largeObject();
  const writable = await lo.writable();
  await new Promise((r) => createReadStream(file).pipe(writable).on("finish", r));
  await lo.seek(0);

  const out = createHash("md5");
  await new Promise((r) =>
    lo.readable().then((x) => x.on("data", (x) => out.update(x)).on("end", r))
  );

  assert.equal(out.digest("hex"), md5);
  await lo.close();
  assert.equal(createHash("md5").update(await stored(sql, lo.oid)).digest("hex"), md5);
  await sql`select lo_unlink(${lo.oid}::int8::oid)`;
});

serverTest(
  SEVERAL_SESSIONS,
  "large object: write, read, seek, tell, size and truncate as postgres.js's results; close commits",
  async () => {
    await using sql = postgres(url, { max: 2, ...quiet });
    const lo = await sql.largeObject();
    assert.ok(Number.isInteger(lo.oid) && lo.oid > 0);
    assert.deepEqual([...await lo.write(new TextEncoder().encode("hello world"))], [{
      lowrite: 11,
    }]);
    assert.deepEqual([...await lo.tell()], [{ lo_tell64: 11 }]);
    assert.deepEqual([...await lo.size()], [{ position: 11, size: 11 }]);
    assert.deepEqual([...await lo.seek(6)], [{ lo_lseek64: 6 }]);
    const [{ data }] = await lo.read(100);
    assert.ok(data instanceof Buffer);
    assert.equal(data.toString(), "world");
    assert.equal((await lo.read(10))[0].data.length, 0, "nothing past the end");
    assert.deepEqual([...await lo.seek(-5, 2)], [{ lo_lseek64: 6 }]); // from the end
    assert.deepEqual([...await lo.seek(-1, 1)], [{ lo_lseek64: 5 }]); // from the current position
    await lo.write(","); // a string is written as UTF-8
    assert.deepEqual([...await lo.truncate(8)], [{ lo_truncate64: 0 }]);
    assert.deepEqual([...await lo.size()], [{ position: 6, size: 8 }], "size() keeps the position");

    // Operations issued together are pipelined on the transaction's connection, in order.
    const [, , [{ data: back }]] = await Promise.all([lo.seek(0), lo.write("HE"), lo.read(3)]);
    assert.equal(back.toString(), "llo");

    // Not committed yet: another connection does not see it.
    assert.equal(
      (await sql`select count(*)::int as n from pg_largeobject_metadata where oid = ${lo.oid}::int8::oid`)[
        0
      ].n,
      0,
    );
    await lo.close();
    await lo.close(); // once only
    assert.equal((await stored(sql, lo.oid)).toString(), "HEllo,wo");
    await assert.rejects(
      lo.read(1),
      (e) => e instanceof QueryError && e.code === "LARGE_OBJECT_CLOSED",
    );

    // Opened again by OID, read-only.
    const again = await sql.largeObject(lo.oid, 0x00040000);
    assert.equal(again.oid, lo.oid);
    assert.equal((await again.read(100))[0].data.toString(), "HEllo,wo");
    await assert.rejects(again.write("x"), (e) => e instanceof PostgresError);
    await assert.rejects(again.close(), (e) => e instanceof PostgresError && e.code === "25P02");
    await sql`select lo_unlink(${lo.oid}::int8::oid)`;
  },
);

Deno.test("large object streams: readable({ start, end, highWaterMark }) and writable({ start })", async () => {
  await using sql = postgres(url, quiet);
  const lo = await sql.largeObject();
  const bytes = Buffer.from(Array.from({ length: 50000 }, (_, i) => i % 251));
  await pipeline(
    (async function* () {
      for (let i = 0; i < bytes.length; i += 7000) yield bytes.subarray(i, i + 7000);
    })(),
    await lo.writable({ highWaterMark: 4096 }),
  );
  assert.deepEqual([...await lo.size()], [{ position: 50000, size: 50000 }]);

  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(chunk);
      callback();
    },
  });
  await pipeline(await lo.readable({ start: 1000, end: 21000, highWaterMark: 3000 }), sink);
  assert.ok(chunks.every((c) => c.length <= 3000), "at most highWaterMark bytes per read");
  assert.deepEqual(Buffer.concat(chunks), bytes.subarray(1000, 21000));

  const tail: Buffer[] = [];
  for await (const chunk of await lo.readable({ start: 49990 })) tail.push(chunk);
  assert.deepEqual(Buffer.concat(tail), bytes.subarray(49990));

  const overwrite = await lo.writable({ start: 10 });
  overwrite.end("ABC");
  await new Promise((r) => overwrite.on("finish", r));
  await lo.close();
  const all = await stored(sql, lo.oid);
  assert.equal(all.length, 50000);
  assert.equal(all.subarray(10, 13).toString(), "ABC");
  assert.deepEqual(all.subarray(13, 100), bytes.subarray(13, 100));
  await sql`select lo_unlink(${lo.oid}::int8::oid)`;
});

Deno.test("large object failures: typed argument errors, server errors roll back and release the connection", async () => {
  await using sql = postgres(url, { max: 1, ...quiet });
  const invalid = (e: unknown) => e instanceof QueryError && e.code === "INVALID_ARGUMENTS";
  await assert.rejects(sql.largeObject(-1), invalid);
  await assert.rejects(sql.largeObject(1.5), invalid);
  await assert.rejects(sql.largeObject(undefined, Number.NaN), invalid);
  // A missing object: the transaction is rolled back and the one connection is free again.
  await assert.rejects(
    sql.largeObject(4000000000),
    (e) => e instanceof PostgresError && e.code === "42704",
  );
  assert.equal((await sql`select 1 as one`)[0].one, 1);

  const lo = await sql.largeObject();
  await assert.rejects(lo.read(-1), invalid);
  await assert.rejects(lo.seek(0, 3), invalid);
  await assert.rejects(lo.truncate(Number.NaN), invalid);
  await assert.rejects(lo.write(42 as unknown as Uint8Array), invalid);
  await assert.rejects(lo.readable({ start: 10, end: 5 }), invalid);
  // Argument errors sent nothing: the transaction is still good and the object can be kept.
  await lo.write("kept");
  await lo.close();
  assert.equal((await stored(sql, lo.oid)).toString(), "kept");

  // A server error aborts the transaction: close() rejects with it and rolls back.
  const failing = await sql.largeObject();
  await assert.rejects(failing.seek(-10), (e) => e instanceof PostgresError);
  await assert.rejects(failing.close(), (e) => e instanceof PostgresError && e.code === "25P02");
  const [{ n }] = await sql`
    select count(*)::int as n from pg_largeobject_metadata where oid = ${failing.oid}::int8::oid`;
  assert.equal(n, 0, "the creation was rolled back");
  await sql`select lo_unlink(${lo.oid}::int8::oid)`;
});

Deno.test("large object dropped without close() is rolled back when collected, releasing its connection", async () => {
  const fixture = new URL("./fixtures/abandoned_large_object.ts", import.meta.url);
  const report = await runWithGc(fixture, [url]) as { freed: boolean; stored: number | null };
  assert.equal(report.freed, true, "the reserved connection was never released");
  assert.equal(report.stored, 0, "the unclosed large object was not rolled back");
});

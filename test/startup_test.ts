// The pipelined startup: queries issued before a connection is up ride in the same write as the
// last authentication message (after the catalog query of fetch_types), not after
// ReadyForQuery; a failed authentication rejects them with its error and nothing more is sent;
// SCRAM's salted password is derived once per (password, salt, iterations) in a process.
import assert from "node:assert/strict";
import postgres, { type Options, PostgresError, type Sql } from "../mod.ts";
import type { ClusterInfo } from "./harness/cluster.ts";
import { plainCluster, tlsCluster } from "./harness/env.ts";
import { clusterTest, quiet } from "./harness/connect.ts";
import { type Flight, flightRecorder, frontendTypes } from "./harness/flights.ts";

const server = plainCluster() ?? tlsCluster();

type Method = "trust" | "password" | "md5" | "scram";

/**
 * Runs `fn` with a client of `user` connected (plaintext, one connection) through a flight
 * recorder; resolves to every connection's flights.
 */
async function throughRecorder(
  c: ClusterInfo,
  user: { user: string; password: string },
  extra: Options,
  fn: (sql: Sql) => Promise<void>,
): Promise<Flight[][]> {
  const rec = flightRecorder({ hostname: c.host, port: c.port });
  const sql = postgres({
    ...quiet,
    host: "127.0.0.1",
    port: rec.port,
    database: c.database,
    user: user.user,
    password: user.password,
    ssl: "disable",
    max: 1,
    ...extra,
  });
  try {
    await fn(sql);
  } finally {
    await sql.end();
    await rec.close();
  }
  return rec.connections;
}

/** The message types of each client flight of the first connection (see throughRecorder). */
async function recorded(
  c: ClusterInfo,
  user: { user: string; password: string },
  extra: Options,
  fn: (sql: Sql) => Promise<void>,
): Promise<string[][]> {
  const [flights] = await throughRecorder(c, user, extra, fn);
  return flights.filter((f) => f.from === "client").map((f) => frontendTypes(f.bytes));
}

/** The trust superuser, over plain TCP: for setting things up. */
function adminOf(c: ClusterInfo): Sql {
  return postgres({
    ...quiet,
    host: c.host,
    port: c.port,
    database: c.database,
    user: c.users.trust.user,
    ssl: "disable",
    max: 1,
  });
}

/** Requests in a flight: each ends with a Sync, or is one simple Query (the catalog query). */
const requests = (types: string[]) => types.filter((t) => t === "S" || t === "Q").length;

/** Two queries issued before the connection exists; checks their answers. */
async function twoQueries(sql: Sql): Promise<void> {
  const [a, b] = await Promise.all([sql`select 1 as a`, sql`select 2 as b`]);
  assert.equal(a[0].a, 1);
  assert.equal(b[0].b, 2);
}

const expected: Record<Method, { flights: number; ridesWith?: string }> = {
  // Nothing follows the startup message: the queries go once the server said AuthenticationOk.
  trust: { flights: 2 },
  // Behind the password message, in the same write.
  password: { flights: 2, ridesWith: "p" },
  md5: { flights: 2, ridesWith: "p" },
  // Plaintext: the server has not proved its identity when the client-final message goes, so
  // the queries wait for its SCRAM signature (they leave when it arrives, before ReadyForQuery).
  scram: { flights: 4 },
};

for (const method of ["trust", "password", "md5", "scram"] as const) {
  clusterTest(`startup pipelining (${method}): where the first queries ride`, server, async (c) => {
    const flights = await recorded(c, c.users[method], {}, twoQueries);
    const want = expected[method];
    assert.equal(flights.length, want.flights, JSON.stringify(flights));
    const last = flights[flights.length - 1];
    // The catalog query of fetch_types and the two queries, in one write.
    assert.equal(requests(last), 3, JSON.stringify(last));
    if (want.ridesWith) assert.equal(last[0], want.ridesWith, "behind the last auth message");
    else assert.notEqual(last[0], "p", "not in a write of authentication");
    if (method === "scram") assert.deepEqual(flights[2], ["p"], "the client-final rides alone");
  });
}

clusterTest(
  "startup pipelining: with target_session_attrs the queries wait for the session's kind",
  server,
  async (c) => {
    const [connection] = await throughRecorder(
      c,
      c.users.password,
      { target_session_attrs: "read-write" },
      twoQueries,
    );
    const sent = connection.filter((f) => f.from === "client");
    const flights = sent.map((f) => frontendTypes(f.bytes));
    assert.deepEqual(flights[1], ["p"], "nothing rides behind the password");
    // PostgreSQL 14 and later report in_hot_standby and default_transaction_read_only at
    // startup; 13 reports neither, so the kind costs one query, alone, before the queries go.
    const asked = c.version < 140000;
    assert.equal(flights.length, asked ? 4 : 3, JSON.stringify(flights));
    if (asked) {
      assert.deepEqual(flights[2], ["Q"], "the session's kind, asked alone");
      assert.match(new TextDecoder().decode(sent[2].bytes), /pg_is_in_recovery/);
    }
    assert.equal(requests(flights[flights.length - 1]), 3, "then the queries, in one write");
  },
);

for (const method of ["password", "md5", "scram"] as const) {
  clusterTest(
    `startup pipelining (${method}): a wrong password rejects every queued query with the ` +
      "server's error, and nothing more is written",
    server,
    async (c) => {
      const user = { user: c.users[method].user, password: "not the password" };
      const connections = await throughRecorder(c, user, {}, async (sql) => {
        const outcomes = await Promise.allSettled([sql`select 1`, sql`select 2`, sql`select 3`]);
        for (const o of outcomes) {
          assert.equal(o.status, "rejected");
          const e = (o as PromiseRejectedResult).reason;
          assert.ok(e instanceof PostgresError && e.code === "28P01", `${e}`);
        }
      });
      assert.equal(connections.length, 1, "no second attempt");
      const flights = connections[0];
      const last = flights[flights.length - 1];
      assert.equal(last.from, "server", "the server's error is the last word");
    },
  );
}

clusterTest(
  "startup pipelining: a first query already decodes user-defined arrays (fetch_types rides ahead)",
  server,
  async (c) => {
    const admin = adminOf(c);
    const type = `mood_${crypto.randomUUID().slice(0, 8)}`;
    try {
      await admin.unsafe(`create type ${type} as enum ('sad', 'happy')`);
      const flights = await recorded(c, c.users.password, {}, async (sql) => {
        const [row] = await sql.unsafe(`select array['happy', 'sad']::${type}[] as m`, []);
        assert.deepEqual(row.m, ["happy", "sad"]);
      });
      assert.equal(flights.length, 2, "the catalog query and the query rode behind the password");
    } finally {
      await admin.unsafe(`drop type if exists ${type}`);
      await admin.end();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// The SCRAM key cache. PBKDF2 is counted where Web Crypto runs it.

/** Counts PBKDF2 derivations while `fn` runs. */
async function countPbkdf2(fn: () => Promise<void>): Promise<number> {
  const subtle = crypto.subtle;
  const original = subtle.deriveBits;
  let runs = 0;
  subtle.deriveBits = function (algorithm, key, length) {
    if ((algorithm as { name?: string }).name === "PBKDF2") runs++;
    return original.call(subtle, algorithm, key, length);
  } as typeof original;
  try {
    await fn();
  } finally {
    subtle.deriveBits = original;
  }
  return runs;
}

clusterTest(
  "scram cache: a later connection derives nothing; a changed password still works",
  server,
  async (c) => {
    const admin = adminOf(c);
    // The scram user with a fresh password (so a fresh salt): no earlier test derived its keys.
    const role = c.users.scram.user;
    const first = `first-${crypto.randomUUID()}`;
    const second = `second-${crypto.randomUUID()}`;
    const connect = async (password: string) => {
      const sql = postgres({
        ...quiet,
        host: c.host,
        port: c.port,
        database: c.database,
        user: role,
        password,
        ssl: "disable",
        max: 2,
      });
      try {
        // Two connections of one pool, opened together.
        const rows = await Promise.all([
          sql`select pg_sleep(0.05), 1 as x`,
          sql`select pg_sleep(0.05), 1 as x`,
        ]);
        assert.deepEqual(rows.map((r) => r[0].x), [1, 1]);
      } finally {
        await sql.end();
      }
    };
    try {
      await admin.unsafe("set password_encryption = 'scram-sha-256'");
      await admin.unsafe(`alter role ${role} password '${first}'`);
      assert.equal(await countPbkdf2(() => connect(first)), 1, "one derivation for the pool");
      assert.equal(await countPbkdf2(() => connect(first)), 0, "a later client derives nothing");
      await admin.unsafe(`alter role ${role} password '${second}'`);
      assert.equal(await countPbkdf2(() => connect(second)), 1, "a new password: a new key");
      await assert.rejects(connect(first), (e) => e instanceof PostgresError && e.code === "28P01");
    } finally {
      await admin.unsafe(
        `alter role ${role} password '${c.users.scram.password.replaceAll("'", "''")}'`,
      );
      await admin.end();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// A cancel for a query that rode with the password, asked before the server sent the backend's
// key: it must wait for the key (a CancelRequest without it names no backend and does nothing).
// What is checked is the CancelRequest itself (whether it then stops the query also depends on
// whether the server has started it, a race of its own).

clusterTest(
  "startup pipelining: a query cancelled before the backend's key is known is still cancelled",
  server,
  async (c) => {
    // A proxy that holds the server's answers once the client has sent its password message.
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let release!: () => void;
    const released = new Promise<void>((r) => release = r);
    let passwordSent!: () => void;
    const sentPassword = new Promise<void>((r) => passwordSent = r);
    const pumps: Promise<void>[] = [];
    const conns: Deno.Conn[] = [];
    const cancels: { pid: number; secret: number }[] = [];
    const accepting = (async () => {
      for await (const client of listener) {
        const upstream = await Deno.connect({ hostname: c.host, port: c.port });
        conns.push(client, upstream);
        let held = false;
        const up = async () => {
          const buf = new Uint8Array(65536);
          for (;;) {
            const n = await client.read(buf).catch(() => null);
            if (n === null) break;
            const types = frontendTypes(buf.slice(0, n));
            if (types[0] === "cancel") {
              const view = new DataView(buf.buffer, 0, n);
              cancels.push({ pid: view.getInt32(8), secret: view.getInt32(12) });
            }
            if (!held && types.includes("p")) {
              held = true;
              passwordSent();
            }
            await upstream.write(buf.slice(0, n)).catch(() => {});
          }
        };
        const down = async () => {
          const buf = new Uint8Array(65536);
          for (;;) {
            const n = await upstream.read(buf).catch(() => null);
            if (n === null) break;
            if (held) await released;
            await client.write(buf.slice(0, n)).catch(() => {});
          }
        };
        pumps.push(up(), down());
      }
    })();
    const sql = postgres({
      ...quiet,
      host: "127.0.0.1",
      port: (listener.addr as Deno.NetAddr).port,
      database: c.database,
      user: c.users.password.user,
      password: c.users.password.password,
      ssl: "disable",
      max: 1,
      fetch_types: false, // so the slow query is the first request: nothing answered before it
    });
    try {
      const slow = sql`select pg_sleep(1)`;
      const outcome = slow.execute().then(() => "ran to the end", (e) => e);
      await sentPassword; // the query rode with it: it is on the connection, not waiting locally
      slow.cancel();
      assert.equal(cancels.length, 0, "no CancelRequest before the backend's key is known");
      release();
      const e = await outcome;
      assert.ok(
        e === "ran to the end" || (e instanceof PostgresError && e.code === "57014"),
        `${e}`,
      );
      const [{ pid }] = await sql`select pg_backend_pid() as pid`;
      assert.equal(cancels.length, 1, "one CancelRequest");
      assert.equal(cancels[0].pid, pid, "it names the backend");
      assert.notEqual(cancels[0].secret, 0);
    } finally {
      release();
      await sql.end();
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // already closed
        }
      }
      await accepting.catch(() => {});
      await Promise.allSettled(pumps);
    }
  },
);

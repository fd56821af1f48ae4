/**
 * A connection whose start fails after it took waiting queries (they ride behind the password):
 * the server ran none of them, so the pool takes them back. They keep their place and their
 * connect_timeout clock.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, type DenoLikeConn } from "./harness/postgres.ts";
import { databaseUrl } from "./harness/env.ts";
import { quiet } from "./harness/connect.ts";
import { until, within } from "./harness/wait.ts";

const url = databaseUrl();
const server = new URL(url.replace(/^postgres(ql)?:/, "http:"));
const target = { hostname: server.hostname, port: Number(server.port || 5432) };
const text = new TextDecoder();

// AuthenticationCleartextPassword: the driver answers with the password and the queries behind it.
const ASK_PASSWORD = new Uint8Array([0x52, 0, 0, 0, 8, 0, 0, 0, 3]);

/**
 * A server that asks for a password, takes what comes, then says nothing until `close()` (or
 * the driver gives up on it). `written` is everything the driver wrote to it.
 */
class SilentAfterPassword implements DenoLikeConn {
  written = "";
  /**
   * Calls of close(): a test's own, then the driver's once it gave the attempt up, which it
   * does just before it hands back the queries the attempt took.
   */
  closes = 0;
  #asked = false;
  #closed = false;
  #wake: ((n: number | null) => void) | null = null;

  read(p: Uint8Array): Promise<number | null> {
    if (this.#closed) return Promise.resolve(null);
    if (!this.#asked) {
      this.#asked = true;
      p.set(ASK_PASSWORD);
      return Promise.resolve(ASK_PASSWORD.length);
    }
    return new Promise((resolve) => this.#wake = resolve);
  }

  write(p: Uint8Array): Promise<number> {
    this.written += text.decode(p);
    return Promise.resolve(p.length);
  }

  close(): void {
    this.closes++;
    this.#closed = true;
    this.#wake?.(null);
  }
}

const connectReal = () => Deno.connect(target);

Deno.test("failed start: a query it took back times out at connect_timeout from when it was sent", async () => {
  const fakes: SilentAfterPassword[] = [];
  let down = false;
  await using sql = postgres(url, {
    ...quiet,
    max: 1,
    password: "unused under trust",
    connect_timeout: 0.5,
    socket: () => {
      if (!down) return connectReal();
      const fake = new SilentAfterPassword();
      fakes.push(fake);
      return fake;
    },
  });
  await sql`select 1`; // it worked once: an outage is retried until connect_timeout
  down = true;
  await sql`select pg_terminate_backend(pg_backend_pid())`.catch(() => {});
  const waiting = sql`select 'taken back' as x`.execute();
  const e = await within(waiting.catch((e) => e), 10_000, "the query waiting through the outage");
  assert.ok(e instanceof ConnectionError, `${e}`);
  assert.equal(e.code, "CONNECT_TIMEOUT");
  assert.equal(e.outcome, "not-sent");
  assert.match(fakes[0].written, /taken back/, "the first attempt took the query");
  // The attempt ran out after connect_timeout, so the query had waited that long already: no
  // second attempt starts its clock again.
  assert.equal(fakes.length, 1, "connect_timeout counted from the failed attempt's end");
});

Deno.test("failed starts: the queries two attempts took back run in the order they were sent", async () => {
  await using admin = postgres(url, { ...quiet, max: 1 });
  const seq = `start_failure_order_${Date.now()}`;
  await admin.unsafe(`create sequence ${seq}`);
  try {
    const fakes: SilentAfterPassword[] = [];
    let down = false;
    await using sql = postgres(url, {
      ...quiet,
      max: 2,
      password: "unused under trust",
      socket: () => {
        if (!down || fakes.length === 2) return connectReal();
        const fake = new SilentAfterPassword();
        fakes.push(fake);
        return fake;
      },
    });
    await sql`select 1`;
    down = true;
    await sql`select pg_terminate_backend(pg_backend_pid())`.catch(() => {});
    const first = sql.unsafe(`select nextval('${seq}')::int as n`).execute();
    const second = sql.unsafe(`select nextval('${seq}')::int as n, 2 as second`).execute();
    await until(
      "both queries taken by a failing attempt",
      () => fakes.filter((f) => f.written.includes("nextval")).length === 2,
    );
    const holding = (s: string) => fakes.find((f) => f.written.includes(s))!;
    const secondHolder = holding("2 as second");
    const firstHolder = fakes.find((f) => f !== secondHolder)!;
    assert.match(firstHolder.written, /nextval/, "each attempt took one query");
    // The first query's attempt fails first; the second's then goes back too.
    firstHolder.close();
    await until("the driver giving the first attempt up", () => firstHolder.closes === 2);
    secondHolder.close();
    const [[a], [b]] = await within(Promise.all([first, second]), 10_000, "both queries");
    assert.ok(a.n < b.n, `the first query ran first (${a.n}, ${b.n})`);
  } finally {
    await admin.unsafe(`drop sequence ${seq}`);
  }
});

Deno.test("failed start: fetch_types' catalog query is sent once, by the connection that starts", async () => {
  let catalogQueries = 0;
  let attempts = 0;
  let failing: SilentAfterPassword | undefined;
  const counting = async (): Promise<DenoLikeConn> => {
    // The failed start closes its socket (its second close), then hands back what it took.
    await until("the failed start given up", () => failing?.closes === 2);
    const conn = await connectReal();
    return {
      read: (p) => conn.read(p),
      write: (p) => {
        catalogQueries += text.decode(p).split("from pg_catalog.pg_type t").length - 1;
        return conn.write(p);
      },
      close: () => conn.close(),
    };
  };
  await using sql = postgres(url, {
    ...quiet,
    max: 2,
    password: "unused under trust",
    socket: () => {
      if (++attempts > 1) return counting();
      const fake = failing = new SilentAfterPassword();
      const write = fake.write.bind(fake);
      fake.write = async (p) => {
        const n = await write(p);
        if (fake.written.includes("pg_catalog.pg_type")) {
          fake.close(); // the password with the catalog query behind it: refused, none ran
        }
        return n;
      };
      return fake;
    },
  });
  const rows = await within(
    Promise.all([sql`select 1 as a`, sql`select 2 as b`]),
    10_000,
    "the queries the failed start took",
  );
  assert.deepEqual([rows[0][0].a, rows[1][0].b], [1, 2]);
  assert.equal(attempts, 2, "the second start took both");
  assert.equal(catalogQueries, 1, "the catalog query the failed start took is not sent again");
});

/**
 * How connections are established and how their failures surface, as postgres.js programs expect:
 * the `socket` option, Node's errno codes, CONNECT_TIMEOUT, options whose own toString throws,
 * `sql.parameters`, and `sql.options`.
 */
import assert from "node:assert/strict";
import * as net from "node:net";
import postgres, {
  ConnectionError,
  type NodeLikeSocket,
  type Options,
  PostgresError,
  type Sql,
  type UserSocket,
} from "./harness/postgres.ts";
import { databaseUrl, plainCluster, tlsCluster } from "./harness/env.ts";
import { assertConnectionError, clusterTest, quiet } from "./harness/connect.ts";
import { delay, settledYet, until, untilSleeping, within } from "./harness/wait.ts";
import { NETWORK, serverTest } from "./harness/pglite_mode.ts";
import { encoder, SSL_REQUEST, withServer } from "./harness/fake_server.ts";

const url = databaseUrl();
const server = new URL(url.replace(/^postgres(ql)?:/, "http:"));
const target = { host: server.hostname, port: Number(server.port || 5432) };

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A node:net socket connected to `port`, resolved once connected (postgres.js's test shape). */
function nodeSocket(
  host: string,
  port: number,
  onFirstData?: (chunk: Uint8Array) => void,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = new net.Socket();
    s.connect(port, host);
    if (onFirstData) s.once("data", onFirstData);
    s.on("error", reject);
    s.on("connect", () => resolve(s));
  });
}

/** A TCP server that accepts and never answers; counts and closes its connections on stop. */
function silentServer(): { port: number; accepted: () => number; stop: () => void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  (async () => {
    for await (const c of listener) conns.push(c);
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    accepted: () => conns.length,
    stop: () => {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed by the client */ }
      }
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The socket option

serverTest(
  NETWORK,
  "socket: a node:net Socket the user connected carries the session; their data listener coexists",
  async () => {
    let first: number | undefined;
    let calls = 0;
    await using sql = postgres(url, {
      ...quiet,
      max: 1,
      socket: () => {
        calls++;
        return nodeSocket(target.host, target.port, (x) => first ??= x[0]);
      },
    });
    const [{ x }] = await sql`select 1 as x`;
    assert.equal(x, 1);
    assert.equal(
      first,
      82,
      "the first byte the user's listener saw is 'R' (no SSLRequest under prefer)",
    );
    assert.equal(calls, 1);
    // The connection keeps working after the first exchange (our listener is the one reading).
    const rows = await Promise.all([sql`select 2 as y`, sql`select 3 as y`]);
    assert.deepEqual(rows.map((r) => r[0].y), [2, 3]);
  },
);

serverTest(
  NETWORK,
  "socket: a Deno.Conn (sync or async) works too, and the function sees postgres.js-shaped options",
  async () => {
    let seen: Parameters<NonNullable<Options["socket"]>>[0] | undefined;
    await using sql = postgres(url, {
      ...quiet,
      max: 1,
      socket: (o) => {
        seen = o;
        return Deno.connect({ hostname: o.target.host, port: o.target.port });
      },
    });
    const [{ who }] = await sql`select current_user::text as who`;
    assert.equal(who, sql.options.user);
    assert.ok(seen !== undefined);
    assert.deepEqual(seen.host, [target.host]);
    assert.deepEqual(seen.port, [target.port]);
    assert.deepEqual(seen.target, target);
    assert.equal(seen.user, sql.options.user);
    assert.equal(seen.database, sql.options.database);
  },
);

serverTest(
  NETWORK,
  "socket: whatever the function throws or rejects with rejects the query, reserve() and begin()",
  async () => {
    const own = new Error("own error");
    const cases: [string, () => unknown, (e: unknown) => void][] = [
      ["throw 'wat'", () => {
        throw "wat";
      }, (e) => {
        assert.ok(e instanceof Error);
        assert.equal(e.message, "wat");
      }],
      ["reject null", () => Promise.reject(null), (e) => {
        assert.ok(e instanceof Error);
        assert.equal(e.message, "null");
      }],
      ["throw an Error", () => {
        throw own;
      }, (e) => assert.equal(e, own, "the user's own error, unwrapped")],
      ["return a number", () => 42, (e) => {
        assertConnectionError(e, "CONNECT_FAILED");
        assert.match((e as Error).message, /node:net Socket or Deno\.Conn/);
      }],
    ];
    for (const [what, socket, check] of cases) {
      const sql = postgres(url, { ...quiet, socket: socket as Options["socket"] });
      try {
        check(
          await sql`select 1`.then(() => assert.fail(`${what}: expected a rejection`), (e) => e),
        );
        check(await sql.reserve().then(() => assert.fail(`${what}: reserve`), (e) => e));
        check(await sql.begin(() => 1).then(() => assert.fail(`${what}: begin`), (e) => e));
        // The pool is not poisoned: it keeps rejecting cleanly.
        check(await sql`select 2`.then(() => assert.fail(`${what}: second query`), (e) => e));
      } finally {
        await sql.end();
      }
    }
  },
);

/**
 * A client (max 1) whose first connection reaches the server and whose later ones are whatever
 * `later` opens; resolves once idle_timeout closed the first, so the next caller must reconnect.
 */
async function afterFirstConnection(later: () => unknown, connectTimeout: number): Promise<Sql> {
  let first: net.Socket | null = null;
  let firstClosed = false;
  const sql = postgres(url, {
    ...quiet,
    max: 1,
    idle_timeout: 0.05,
    connect_timeout: connectTimeout,
    socket: (() => {
      if (first !== null) return later();
      first = net.connect(target.port, target.host).on("close", () => firstClosed = true);
      return first;
    }) as Options["socket"],
  });
  await sql`select 1`;
  await until("idle_timeout closing the first connection", () => firstClosed);
  return sql;
}

/** What a query, reserve() and begin() issued together reject with; fails if one hangs. */
function rejections(sql: Sql): Promise<unknown[]> {
  return within(
    Promise.all([
      sql`select 1`.then(() => null, (e) => e),
      sql.reserve().then(() => null, (e) => e),
      sql.begin(() => 1).then(() => null, (e) => e),
    ]),
    5000,
    "a query, reserve() and begin()",
  );
}

serverTest(
  NETWORK,
  "socket: after a first connection, a value it throws still rejects query, reserve() and begin() at once, alike",
  async () => {
    // postgres.js's 'Ensure reserve on connection throws proper error' with a pool that was
    // connected: the thrown value was taken for an outage and retried, so reserve() hung.
    for (const thrown of ["wat", new Error("own error")]) {
      const sql = await afterFirstConnection(() => {
        throw thrown;
      }, 30);
      try {
        for (const e of await rejections(sql)) {
          if (thrown instanceof Error) assert.equal(e, thrown, "the user's own error, unwrapped");
          else {
            assertConnectionError(e, "CONNECT_FAILED");
            assert.equal((e as Error).message, "wat");
          }
        }
      } finally {
        await sql.end();
      }
    }
  },
);

serverTest(
  NETWORK,
  "an outage: reserve() and begin() give up at connect_timeout as queries do, never hang",
  async () => {
    // The server "goes away" after the first connection: every later attempt is refused.
    const closed = freePort();
    const sql = await afterFirstConnection(() => net.connect(closed, target.host), 0.5);
    try {
      for (const e of await rejections(sql)) {
        assertConnectionError(e, "CONNECT_TIMEOUT");
        assert.equal((e as ConnectionError).outcome, "not-sent");
      }
    } finally {
      await sql.end();
    }
  },
);

serverTest(
  NETWORK,
  "socket: a node:net Socket returned while still connecting to a closed port → ECONNREFUSED",
  async () => {
    const port = freePort();
    const sql = postgres(url, { ...quiet, socket: () => net.connect(port, "127.0.0.1") });
    try {
      const e = assertConnectionError(await sql`select 1`.catch((e) => e), "ECONNREFUSED");
      assert.match(e.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.equal(e.syscall, "connect");
      assert.equal(typeof e.errno, "number");
    } finally {
      await sql.end();
    }
  },
);

// A user's node socket can be destroyed without an error (their code, or a wrapper's): only its
// 'close' event says so, and nothing may wait on it for ever (connect_timeout 0 is no limit).
for (const stage of ["the SSLRequest", "the TLS handshake"] as const) {
  serverTest(
    NETWORK,
    `socket: a node socket destroyed without an error during ${stage} rejects at once`,
    async () => {
      let inStage!: () => void;
      const reached = new Promise<void>((resolve) => inStage = resolve);
      await withServer(async (peer) => {
        assert.equal(await peer.int32(), 8);
        assert.equal(await peer.int32(), SSL_REQUEST);
        if (stage === "the TLS handshake") {
          await peer.send(encoder.encode("S"));
          await peer.take(5); // the ClientHello's record header: the handshake is under way
        }
        inStage();
        return await peer.closedWithin(5000);
      }, async (srv) => {
        const sockets: net.Socket[] = [];
        const sql = postgres({
          ...quiet,
          host: "127.0.0.1",
          port: srv.port,
          user: "u",
          database: "d",
          ssl: "require",
          connect_timeout: 0,
          max: 1,
          socket: async () => {
            const s = await nodeSocket("127.0.0.1", srv.port);
            sockets.push(s);
            return s;
          },
        });
        try {
          const query = sql`select 1`.execute().catch((e) => e);
          await reached;
          sockets[0].destroy();
          const e = await within(query, 3000, `the query whose socket closed during ${stage}`);
          const code = stage === "the SSLRequest" ? "CONNECT_FAILED" : "SSL_FAILED";
          assert.match(assertConnectionError(e, code).message, /closed during TLS negotiation/);
        } finally {
          await sql.end({ timeout: 0 });
        }
      });
    },
  );
}

serverTest(
  NETWORK,
  "socket: a node-like socket that never calls a write back: its close still ends the start",
  async () => {
    // A wrapper of the user's that takes writes but drops their callbacks (its own buffering):
    // the startup message's write never completes, and only the socket's close can end it.
    const real = await nodeSocket(target.host, target.port);
    let wrote!: () => void;
    const written = new Promise<void>((resolve) => wrote = resolve);
    const wrapper: NodeLikeSocket = {
      write: (data: Uint8Array) => {
        wrote();
        return real.write(data);
      },
      on: (event, listener) => real.on(event, listener),
      off: (event, listener) => real.off(event, listener),
      destroy: () => real.destroy(),
      get destroyed() {
        return real.destroyed;
      },
    };
    const sql = postgres(url, {
      ...quiet,
      ssl: "disable",
      connect_timeout: 0,
      socket: () => wrapper,
    });
    try {
      const query = sql`select 1`.execute().catch((e) => e);
      await written;
      real.destroy();
      const e = await within(query, 3000, "the query whose socket closed during its first write");
      assertConnectionError(e, "CONNECTION_CLOSED");
    } finally {
      await sql.end({ timeout: 0 });
    }
  },
);

serverTest(
  NETWORK,
  "socket: a client that was connected retries through the function's own ECONNREFUSED",
  async () => {
    let down = false;
    let refusals = 0;
    await using sql = postgres(url, {
      ...quiet,
      max: 1,
      connect_timeout: 10,
      socket: () => {
        if (!down) return Deno.connect({ hostname: target.host, port: target.port });
        refusals++;
        // What a node:net socket's 'error' event carries when nothing listens.
        const e = Object.assign(new Error("connect ECONNREFUSED"), {
          code: "ECONNREFUSED",
          syscall: "connect",
        });
        return Promise.reject(e);
      },
    });
    await sql`select 1`;
    down = true;
    await sql`select pg_terminate_backend(pg_backend_pid())`.catch(() => {});
    const waiting = sql`select 2 as x`.execute();
    await until("two refused attempts", () => refusals >= 2, 5000);
    assert.equal(
      await settledYet(waiting),
      false,
      "the query waits while the connection is retried",
    );
    down = false;
    const [{ x }] = await within(waiting, 8000, "the query waiting through the refusals");
    assert.equal(x, 2);
  },
);

serverTest(
  NETWORK,
  "socket: a function that never resolves gives CONNECT_TIMEOUT; a socket arriving late is closed",
  async () => {
    let closed = false;
    let late: (c: UserSocket) => void = () => {};
    const sql = postgres(url, {
      ...quiet,
      connect_timeout: 0.2,
      socket: () => new Promise((resolve) => late = resolve),
    });
    try {
      const e = assertConnectionError(await sql`select 1`.catch((e) => e), "CONNECT_TIMEOUT");
      assert.equal(e.message, `write CONNECT_TIMEOUT ${target.host}:${target.port}`);
      late({
        read: () => new Promise<null>(() => {}),
        write: (p: Uint8Array) => Promise.resolve(p.length),
        close: () => closed = true,
      });
      await until("the socket handed over after the timeout closed", () => closed, 5000);
    } finally {
      await sql.end();
    }
  },
);

serverTest(
  NETWORK,
  "socket: query cancellation also goes through the socket function",
  async () => {
    let calls = 0;
    await using sql = postgres(url, {
      ...quiet,
      max: 1,
      socket: () => {
        calls++;
        return Deno.connect({ hostname: target.host, port: target.port });
      },
    });
    await sql`select 1`;
    assert.equal(calls, 1);
    const [{ pid }] = await sql`select pg_backend_pid() as pid`;
    const q = sql`select pg_sleep(10)`;
    const running = q.execute().then(() => assert.fail("expected a cancel"), (e) => e);
    await using admin = postgres(url, { ...quiet, max: 1 });
    await untilSleeping(admin, pid);
    q.cancel();
    const e = await within(running, 5000, "the cancelled query");
    assert.ok(e instanceof PostgresError, String(e));
    assert.equal(e.code, "57014");
    assert.equal(calls, 2, "the CancelRequest went over a socket from the function");
  },
);

/** A `socket` option opening a node:net Socket or a Deno.Conn to host:port. */
function userSocket(kind: "node" | "deno", host: string, port: number) {
  return kind === "node"
    ? () => nodeSocket(host, port)
    : () => Deno.connect({ hostname: host, port });
}

for (const kind of ["node", "deno"] as const) {
  clusterTest(
    `socket: sslmode=require runs TLS over the user's ${kind} socket`,
    tlsCluster(),
    async (c) => {
      const socket = userSocket(kind, c.host, c.port);
      await using sql = postgres({
        ...quiet,
        host: c.host,
        port: c.port,
        user: c.users.scram.user,
        password: c.users.scram.password,
        database: c.database,
        ssl: "require",
        max: 1,
        socket,
      });
      const [{ ssl }] = await sql`
      select ssl::text as ssl from pg_stat_ssl where pid = pg_backend_pid()`;
      assert.equal(ssl, "true");
    },
  );

  clusterTest(
    `socket: sslmode=require over a ${kind} socket to a plain server → SSL_NOT_SUPPORTED`,
    plainCluster(),
    async (c) => {
      const socket = userSocket(kind, c.host, c.port);
      await using sql = postgres({
        ...quiet,
        host: c.host,
        port: c.port,
        user: c.users.trust.user,
        database: c.database,
        ssl: "require",
        socket,
      });
      assertConnectionError(await sql`select 1`.catch((e) => e), "SSL_NOT_SUPPORTED");
    },
  );
}

clusterTest(
  "socket: sslmode=prefer stays plain over the user's socket",
  tlsCluster(),
  async (c) => {
    await using sql = postgres({
      ...quiet,
      host: c.host,
      port: c.port,
      user: c.users.trust.user,
      database: c.database,
      ssl: "prefer",
      socket: () => Deno.connect({ hostname: c.host, port: c.port }),
    });
    const [{ ssl }] = await sql`
    select coalesce((select ssl from pg_stat_ssl where pid = pg_backend_pid()), false)::text as ssl`;
    assert.equal(ssl, "false");
  },
);

// ---------------------------------------------------------------------------------------------
// Node's errno codes

Deno.test("refused: the query rejects with code ECONNREFUSED, errno and syscall as Node has them", async () => {
  const port = freePort();
  const sql = postgres(`postgres://localhost:${port}/db`, quiet);
  try {
    const e = assertConnectionError(await sql`select 1`.catch((e) => e), "ECONNREFUSED");
    assert.equal(typeof e.errno, "number");
    assert.ok((e.errno as number) < 0);
    assert.equal(e.syscall, "connect");
    assert.equal(e.port, port);
    assert.equal(e.address, "localhost");
    assert.match(e.message, new RegExp(`localhost:${port}\\b`), "the message names host:port");
  } finally {
    await sql.end();
  }
});

Deno.test("refused: inside sql.begin to port 1 (and through node:tls with verify-full)", async () => {
  for (const ssl of ["disable", "prefer", "verify-full"] as const) {
    const sql = postgres("postgres://127.0.0.1:1/db", { ...quiet, ssl });
    try {
      const e = await sql.begin((tx) => tx`select 1`).catch((e) => e);
      assertConnectionError(e, "ECONNREFUSED");
    } finally {
      await sql.end();
    }
  }
});

Deno.test("a host name that does not resolve → ENOTFOUND; a socket directory without a server → ENOENT", async () => {
  const sql = postgres("postgres://no-such-host.invalid:5432/db", quiet);
  try {
    const e = assertConnectionError(await sql`select 1`.catch((e) => e), [
      "ENOTFOUND",
      "EAI_AGAIN",
    ]);
    assert.equal(e.syscall, "getaddrinfo");
  } finally {
    await sql.end();
  }
  const dir = await Deno.makeTempDir({ prefix: "pgpipe-nosock-" });
  const unix = postgres({ ...quiet, host: dir, port: 5432 });
  try {
    assertConnectionError(await unix`select 1`.catch((e) => e), "ENOENT");
  } finally {
    await unix.end();
    await Deno.remove(dir, { recursive: true });
  }
});

serverTest(
  NETWORK,
  "a client that was connected retries through ECONNREFUSED (as it did CONNECT_FAILED)",
  async () => {
    // A proxy in front of the server that can be taken down and brought back on the same port.
    const port = freePort();
    let listener: Deno.Listener | null = null;
    const pipes = new Set<Deno.Conn>();
    const up = () => {
      const l = Deno.listen({ hostname: "127.0.0.1", port });
      listener = l;
      (async () => {
        for await (const client of l) {
          const upstream = await Deno.connect({ hostname: target.host, port: target.port });
          pipes.add(client).add(upstream);
          client.readable.pipeTo(upstream.writable).catch(() => {});
          upstream.readable.pipeTo(client.writable).catch(() => {});
        }
      })().catch(() => {});
    };
    const down = () => {
      listener?.close();
      for (const c of pipes) {
        try {
          c.close();
        } catch { /* already closed */ }
      }
      pipes.clear();
    };
    up();
    const u = new URL(url.replace(/^postgres(ql)?:/, "http:"));
    const sql = postgres({
      ...quiet,
      host: "127.0.0.1",
      port,
      user: decodeURIComponent(u.username),
      database: u.pathname.slice(1),
      ssl: "disable",
      max: 1,
      connect_timeout: 10,
    });
    try {
      await sql`select 1`;
      down();
      await delay(50); // the client sees its connection close
      const waiting = sql`select 2 as x`.execute();
      await delay(300); // an outage that lasts: several refused attempts
      up();
      const [{ x }] = await within(waiting, 8000, "the query waiting through the outage");
      assert.equal(x, 2);
    } finally {
      await sql.end();
      down();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// CONNECT_TIMEOUT

Deno.test("CONNECT_TIMEOUT: a server that never answers; message `write CONNECT_TIMEOUT host:port`", async () => {
  const silent = silentServer();
  const sql = postgres({ ...quiet, host: "127.0.0.1", port: silent.port, connect_timeout: 0.2 });
  try {
    const t0 = performance.now();
    const e = assertConnectionError(await sql`select 1`.catch((e) => e), "CONNECT_TIMEOUT");
    const ms = performance.now() - t0;
    assert.equal(e.message, `write CONNECT_TIMEOUT 127.0.0.1:${silent.port}`);
    assert.equal(e.errno, "CONNECT_TIMEOUT");
    assert.equal(e.address, "127.0.0.1");
    assert.equal(e.port, silent.port);
    assert.ok(ms >= 190, `it waited for the timeout (${ms} ms)`);
    assert.ok(silent.accepted() >= 1);
  } finally {
    await sql.end();
    silent.stop();
  }
});

serverTest(
  NETWORK,
  "connect_timeout is read at each attempt: valueOf tiny first, then a normal connect",
  async () => {
    let first = true;
    let reads = 0;
    const timeout = {
      valueOf() {
        reads++;
        return first ? (first = false, 0.0001) : 1;
      },
    };
    const sql = postgres(url, { ...quiet, connect_timeout: timeout });
    try {
      assert.equal(reads, 0, "postgres() does not read it");
      const e = await sql`select 1`.catch((e) => e);
      assertConnectionError(e, "CONNECT_TIMEOUT");
      const [{ x }] = await sql`select 1 as x`;
      assert.equal(x, 1, "the next query on the same client connects normally");
      assert.ok(reads >= 2);
    } finally {
      await sql.end();
    }
  },
);

clusterTest(
  "connect_timeout: 0.001 with a SCRAM login → CONNECT_TIMEOUT",
  tlsCluster(),
  async (c) => {
    const sql = postgres({
      ...quiet,
      host: c.host,
      port: c.port,
      user: c.users.scram.user,
      password: c.users.scram.password,
      database: c.database,
      connect_timeout: 0.001,
    });
    try {
      assertConnectionError(await sql`select 1`.catch((e) => e), "CONNECT_TIMEOUT");
    } finally {
      await sql.end();
    }
  },
);

Deno.test("connect_timeout: bad numbers throw from postgres(); a bad valueOf rejects the queries only", async () => {
  for (const bad of [-1, NaN, "soon", "", true]) {
    assert.throws(
      () => postgres(url, { connect_timeout: bad as number }),
      TypeError,
      `connect_timeout ${String(bad)}`,
    );
  }
  assert.equal(postgres(url, { connect_timeout: "2.5" }).options.user.length > 0, true);
  const boom = new Error("valueOf failed");
  const cases: [unknown, (e: unknown) => void][] = [
    [{ valueOf: () => NaN }, (e) => {
      assert.ok(e instanceof TypeError, String(e));
      assert.match(e.message, /connect_timeout/);
    }],
    [{ valueOf: () => -5 }, (e) => assert.ok(e instanceof TypeError, String(e))],
    [{
      valueOf: () => {
        throw boom;
      },
    }, (e) => assert.equal(e, boom)],
  ];
  for (const [value, check] of cases) {
    const sql = postgres(url, { ...quiet, connect_timeout: value as number });
    try {
      check(await sql`select 1`.catch((e) => e));
      check(await sql.reserve().catch((e) => e));
    } finally {
      await sql.end();
    }
  }
});

// ---------------------------------------------------------------------------------------------
// Errors thrown while options are read

Deno.test("a user value whose toString throws: postgres() does not throw; every call rejects with that error", async () => {
  const wat = new Error("wat");
  const sql = postgres(url, {
    ...quiet,
    user: {
      toString: () => {
        throw wat;
      },
    } as unknown as string,
    database: "prut",
  });
  const [q, r, b, l] = await Promise.all([
    sql`select 1`.catch((e) => e),
    sql.reserve().catch((e) => e),
    sql.begin(() => 1).catch((e) => e),
    sql.listen("chan", () => {}).catch((e) => e),
  ]);
  for (const e of [q, r, b, l]) assert.equal(e, wat, "the very error, unwrapped");
  assert.equal((q as Error).message, "wat");
  await sql.end();
});

serverTest(
  NETWORK,
  "the same for host, application_name and connection values; a thrown string becomes an Error",
  async () => {
    const thrower = (value: unknown) => ({
      toString: () => {
        throw value;
      },
    });
    const cases: [Options, (e: unknown) => void][] = [
      [{ host: thrower(new RangeError("host")) as unknown as string }, (e) => {
        assert.ok(e instanceof RangeError);
        assert.equal(e.message, "host");
      }],
      [{ application_name: thrower("app") as unknown as string }, (e) => {
        assert.ok(e instanceof Error);
        assert.equal(e.message, "app");
      }],
      [{ connection: { search_path: thrower(new Error("param")) as unknown as string } }, (e) => {
        assert.equal((e as Error).message, "param");
      }],
      [{ password: thrower(new Error("pw")) as unknown as string }, (e) => {
        assert.equal((e as Error).message, "pw");
      }],
    ];
    for (const [options, check] of cases) {
      const sql = postgres(url, { ...quiet, ...options });
      try {
        check(await sql`select 1`.catch((e) => e));
      } finally {
        await sql.end();
      }
    }
    // Our own validation still throws at once.
    assert.throws(() => postgres(url, { ssl: "sometimes" as "prefer" }), TypeError);
    assert.throws(() => postgres(url, { max: 0 }), TypeError);
    assert.throws(() => postgres(url, { port: 70000 }), TypeError);
  },
);

// ---------------------------------------------------------------------------------------------
// sql.parameters and sql.options

Deno.test("sql.parameters: filled from the first connection, kept up to date", async () => {
  await using sql = postgres(url, { ...quiet, application_name: "compat-params", max: 1 });
  assert.deepEqual({ ...sql.parameters }, {});
  await sql`select 1`;
  assert.equal(sql.parameters.application_name, "compat-params");
  assert.match(sql.parameters.server_version, /^\d+/);
  assert.equal(typeof sql.parameters.TimeZone, "string");
  await sql`set application_name = 'changed'`;
  assert.equal(sql.parameters.application_name, "changed");
});

Deno.test("sql.options: database defaults to the user; URL credentials decode; pass is not enumerable", () => {
  for (const u of ["postgres://localhost", "postgres://localhost/"]) {
    const o = postgres(u).options;
    assert.equal(o.database, o.user, u);
  }
  const fromUrl = postgres("postgres://%C3%B6la:pass%5Eword@localhost/db").options;
  assert.equal(fromUrl.user, "öla");
  assert.equal(fromUrl.pass, "pass^word");
  const o = postgres({ user: "öla", pass: "pass^word" }).options;
  assert.equal([o.user, o.pass].toString(), "öla,pass^word"); // postgres.js's own check
  assert.equal(o.password, "pass^word");
  assert.equal(Object.keys(o).includes("pass"), false);
  assert.equal(JSON.stringify(o).includes("pass^word"), false);
  assert.equal(Deno.inspect(o).includes("pass^word"), false);
});

Deno.test("sql.options has postgres.js's shape: host and port arrays, path, connection, parameters", () => {
  const sql = postgres("postgres://u@db1,db2:5433/app?application_name=shape", {
    max: 3,
    idle_timeout: 7,
    connection: { search_path: "s" },
  });
  const o = sql.options;
  assert.deepEqual(o.host, ["db1", "db2"]);
  assert.deepEqual(o.port, [5432, 5433]);
  assert.equal(o.path, undefined);
  assert.equal(o.database, "app");
  assert.equal(o.max, 3);
  assert.equal(o.idle_timeout, 7);
  assert.equal(o.connect_timeout, 30);
  assert.equal(o.ssl, "prefer");
  assert.equal(o.prepare, true);
  assert.equal(o.fetch_types, true);
  assert.equal(o.connection.application_name, "shape");
  assert.equal(o.connection.search_path, "s");
  assert.equal(o.parameters, sql.parameters, "the same object as sql.parameters");

  const unix = postgres({ host: "/run/pg", port: 6000 }).options;
  assert.deepEqual(unix.host, ["/run/pg"]);
  assert.equal(unix.path, "/run/pg/.s.PGSQL.6000");

  let reads = 0;
  const lazy = {
    valueOf() {
      reads++;
      return 5;
    },
  };
  const o2 = postgres({ connect_timeout: lazy }).options;
  assert.equal(o2.connect_timeout, lazy, "the object as given");
  assert.equal(reads, 0, "not read before a connection attempt");
});

Deno.test("ConnectionError keeps its class and outcome for a refused connection", async () => {
  const sql = postgres(`postgres://127.0.0.1:${freePort()}/db`, quiet);
  try {
    const e = await sql`select 1`.catch((e) => e);
    assert.ok(e instanceof ConnectionError);
    assert.equal(e.outcome, "not-sent");
  } finally {
    await sql.end();
  }
});

Deno.test("onparameter is called during startup too (application_name), as in postgres.js", async () => {
  const seen = new Map<string, string>();
  await using sql = postgres(url, {
    ...quiet,
    application_name: "compat-onparameter",
    onparameter: (k, v) => seen.set(k, v),
  });
  await sql`select 1`;
  assert.equal(seen.get("application_name"), "compat-onparameter");
  assert.ok(seen.has("server_version"));
  assert.equal(sql.parameters.application_name, "compat-onparameter");
});

Deno.test("an onparameter that throws is reported, not thrown: the client keeps working", async () => {
  const errors: unknown[] = [];
  const original = console.error;
  console.error = (...args: unknown[]) => errors.push(args);
  try {
    await using sql = postgres(url, {
      ...quiet,
      max: 1,
      onparameter: () => {
        throw new Error("hook");
      },
    });
    const [{ x }] = await sql`select 1 as x`;
    assert.equal(x, 1);
    assert.ok(errors.length > 0, "the hook's error was logged");
    assert.match(sql.parameters.server_version, /^\d+/, "parameters are kept regardless");
  } finally {
    console.error = original;
  }
});

clusterTest(
  "unix socket: host is the socket directory (postgres.js's 'Unix socket')",
  tlsCluster() ?? plainCluster(),
  async (c) => {
    await using sql = postgres({
      ...quiet,
      host: c.socketDir,
      port: c.port,
      user: c.users.trust.user,
      database: c.database,
    });
    assert.equal(sql.options.path, `${c.socketDir}/.s.PGSQL.${c.port}`);
    const [{ x, addr }] = await sql`select 1 as x, inet_client_addr()::text as addr`;
    assert.equal(x, 1);
    assert.equal(addr, null, "no client address: it is the unix socket");
  },
);

/** Every byte of `s` percent-encoded, so decoding has to be exact. */
function encodeAll(s: string): string {
  return [...new TextEncoder().encode(s)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join(
    "",
  );
}

clusterTest(
  "URL credentials with special characters reach the server decoded exactly",
  tlsCluster() ?? plainCluster(),
  async (c) => {
    // Password checked by the server: the SCRAM user's (it has a colon and an é), every byte encoded.
    const scram = c.users.scram;
    const passwordUrl = `postgres://${encodeAll(scram.user)}:${
      encodeAll(scram.password)
    }@${c.host}:${c.port}/${c.database}`;
    {
      await using sql = postgres(passwordUrl, { ...quiet, ssl: "disable" });
      const [{ who }] = await sql`select current_user::text as who`;
      assert.equal(who, scram.user);
    }
    // A wrong decoding would have failed to authenticate: prove a wrong password is refused.
    {
      await using sql = postgres(passwordUrl.replace(/%..@/, "%21@"), { ...quiet, ssl: "disable" });
      const e = await sql`select 1`.catch((e) => e);
      assert.ok(e instanceof PostgresError, String(e));
      assert.equal(e.code, "28P01");
    }
    // A non-ASCII user name (trust login), postgres.js's 'öla' / 'pass^word'.
    {
      await using admin = postgres({
        ...quiet,
        host: c.host,
        port: c.port,
        user: c.users.trust.user,
        database: c.database,
      });
      await admin`drop role if exists "öla"`;
      await admin`create role "öla" login password 'pass^word'`;
      try {
        await using sql = postgres(
          `postgres://%C3%B6la:pass%5Eword@${c.host}:${c.port}/${c.database}`,
          { ...quiet, ssl: "disable" },
        );
        const [{ who }] = await sql`select current_user::text as who`;
        assert.equal(who, "öla");
        assert.equal(sql.options.pass, "pass^word");
      } finally {
        await admin`drop role if exists "öla"`;
      }
    }
  },
);

Deno.test("Connection ended error: any query after end() rejects with CONNECTION_ENDED", async () => {
  const sql = postgres(url, quiet);
  await sql.end();
  assertConnectionError(await sql``.catch((e) => e), "CONNECTION_ENDED");
  assertConnectionError(await sql`select 1`.catch((e) => e), "CONNECTION_ENDED");
});

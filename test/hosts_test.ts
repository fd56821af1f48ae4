/**
 * Several hosts: the URL and option forms, target_session_attrs and
 * load_balance_hosts against fake servers (any mix of primaries and standbys,
 * reported or not), then a real primary and a pg_basebackup streaming replica:
 * routing by target_session_attrs, and failover after promotion.
 */
import assert from "node:assert/strict";
import postgres, { ConnectionError, type Options, PostgresError } from "../mod.ts";
import { resolveOptions } from "../src/config/resolve.ts";
import { findPgBin, freePort, startCluster } from "./harness/cluster.ts";
import {
  auth,
  backendKeyData,
  concat,
  defaultResponder,
  errorResponse,
  type FakeServer,
  fakeServer,
  FakeSession,
  parameterStatus,
  readyForQuery,
} from "./harness/fake_server.ts";
import { startReplica } from "./harness/replica.ts";
import { withEnv } from "./harness/util.ts";
import { flightRecorder } from "./harness/flights.ts";
import { poll, settledYet, until, within } from "./harness/wait.ts";

const quiet = { onnotice: () => {} };

// ---------------------------------------------------------------------------------------------
// URL and options

const CLEAN_ENV = {
  PGHOST: undefined,
  PGPORT: undefined,
  PGTARGETSESSIONATTRS: undefined,
  PGLOADBALANCEHOSTS: undefined,
};

const pairs = (r: ReturnType<typeof resolveOptions>) => r.hosts.map((h) => `${h.host}:${h.port}`);

Deno.test("URL and options: host lists, port lists, target_session_attrs, load_balance_hosts", async () => {
  await withEnv(CLEAN_ENV, () => {
    const r = resolveOptions(
      "postgres://u@a:5433,[::1]:5434,%2Frun%2Fpg,b/db?target_session_attrs=read-write&load_balance_hosts=random",
    );
    assert.deepEqual(pairs(r), ["a:5433", "::1:5434", "/run/pg:5432", "b:5432"]);
    assert.equal(r.host, "a");
    assert.equal(r.port, 5433);
    assert.equal(r.targetSessionAttrs, "read-write");
    assert.equal(r.loadBalanceHosts, "random");
    assert.equal("target_session_attrs" in r.params, false, "not a startup parameter");
    assert.equal("load_balance_hosts" in r.params, false, "not a startup parameter");
    // libpq keywords in the query: host names only, and one port for all or one per host.
    assert.deepEqual(pairs(resolveOptions("postgres://x/db?host=a,b&port=7000")), [
      "a:7000",
      "b:7000",
    ]);
    assert.deepEqual(pairs(resolveOptions("postgres:///db?host=a,b&port=7000,7001")), [
      "a:7000",
      "b:7001",
    ]);
    assert.throws(() => resolveOptions("postgres:///db?host=a,b,c&port=1,2"), /2 ports for 3/);
    // Options: an array or a comma-separated string, `:port` allowed; the port option wins.
    assert.deepEqual(pairs(resolveOptions(undefined, { host: ["a:1", "b"], port: 9 })), [
      "a:9",
      "b:9",
    ]);
    assert.deepEqual(pairs(resolveOptions(undefined, { host: "a:1, [::2]:3,b" })), [
      "a:1",
      "::2:3",
      "b:5432",
    ]);
    assert.deepEqual(pairs(resolveOptions(undefined, { host: "a,b", port: [1, 2] })), [
      "a:1",
      "b:2",
    ]);
    // A host given in the options still takes the URL's single port, as before.
    assert.deepEqual(pairs(resolveOptions("postgres://u@h:6000/d", { host: "x,y" })), [
      "x:6000",
      "y:6000",
    ]);
    const one = resolveOptions("postgres://u@h/d");
    assert.equal(one.targetSessionAttrs, "any");
    assert.equal(one.loadBalanceHosts, "disable");
    assert.throws(
      () => resolveOptions("postgres://h/d?target_session_attrs=master"),
      /invalid target_session_attrs/,
    );
    assert.throws(() => resolveOptions("postgres://h/d?load_balance_hosts=yes"), TypeError);
    assert.throws(() => resolveOptions("postgres://a:1,b:99999/d"), /invalid port/);
  });
  await withEnv(
    { ...CLEAN_ENV, PGHOST: "e1,e2", PGPORT: "1,2", PGTARGETSESSIONATTRS: "standby" },
    () => {
      const r = resolveOptions(undefined);
      assert.deepEqual(pairs(r), ["e1:1", "e2:2"]);
      assert.equal(r.targetSessionAttrs, "standby");
      assert.equal(
        resolveOptions(undefined, { target_session_attrs: "primary" }).targetSessionAttrs,
        "primary",
      );
    },
  );
});

Deno.test("the password file is read for each host", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const file = `${dir}/pgpass`;
    await Deno.writeTextFile(file, "a:1:db:u:pass-a\nb:2:db:u:pass-b\n", { mode: 0o600 });
    await withEnv({ ...CLEAN_ENV, PGPASSFILE: file, PGPASSWORD: undefined }, async () => {
      const r = resolveOptions("postgres://u@a:1,b:2/db");
      const read = (i: number) => (r.hosts[i].password as () => Promise<string>)();
      assert.deepEqual([await read(0), await read(1)], ["pass-a", "pass-b"]);
      const given = resolveOptions("postgres://u:pw@a:1,b:2/db");
      assert.deepEqual(given.hosts.map((h) => h.password), ["pw", "pw"]);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// ---------------------------------------------------------------------------------------------
// Fake servers

interface Role {
  name: string;
  standby?: boolean;
  /** default_transaction_read_only on (a primary refusing writes by default). */
  readOnly?: boolean;
  /** Report in_hot_standby and default_transaction_read_only (PostgreSQL 14+). Default true. */
  report?: boolean;
  /** Refuse the password with this SQLSTATE instead of letting the client in. */
  refuse?: string;
  /** Let the client in, then never answer a query. */
  silent?: boolean;
}

interface Fake {
  role: Role;
  server: FakeServer;
  /** Sessions open now. */
  open: number;
  /** Sessions accepted so far. */
  accepted: number;
  /** Kind queries asked (when the role does not report its kind). */
  asked: number;
}

/** A fake server with a role; `select 'whoami'` answers its name. */
function fake(role: Role): Fake {
  const f: Fake = { role, open: 0, accepted: 0, asked: 0, server: undefined! };
  f.server = fakeServer(async (peer) => {
    f.accepted++;
    f.open++;
    try {
      await peer.startup();
      if (role.refuse) {
        await peer.send(errorResponse(role.refuse, "password authentication failed"));
        return;
      }
      const report = role.report ?? true;
      const standby = role.standby ?? false;
      await peer.send(concat(
        auth(0),
        parameterStatus("server_version", report ? "16.0" : "13.0"),
        ...(report
          ? [
            parameterStatus("in_hot_standby", standby ? "on" : "off"),
            parameterStatus("default_transaction_read_only", role.readOnly ? "on" : "off"),
          ]
          : []),
        backendKeyData(1, 2),
        readyForQuery(),
      ));
      if (role.silent) {
        await peer.closedWithin(10_000);
        return;
      }
      const session = new FakeSession((text, params) => {
        if (text.includes("pg_is_in_recovery")) {
          f.asked++;
          return {
            columns: [{ name: "r", type: 25 }, { name: "ro", type: 25 }],
            rows: [[String(standby), standby || role.readOnly ? "on" : "off"]],
          };
        }
        if (text.includes("whoami")) {
          return { columns: [{ name: "name", type: 25 }], rows: [[role.name]] };
        }
        return defaultResponder(text, params);
      });
      await session.serve(peer);
    } finally {
      f.open--;
      peer.close();
    }
  });
  return f;
}

/** A port with nothing listening. */
const deadPort = () => freePort();

async function withFakes(roles: Role[], fn: (fakes: Fake[]) => Promise<void>): Promise<void> {
  const fakes = roles.map(fake);
  try {
    await fn(fakes);
  } finally {
    await Promise.all(fakes.map((f) => f.server.close()));
  }
}

const hostList = (ports: number[]) => ports.map((p) => `127.0.0.1:${p}`).join(",");

/** Connects with these hosts and options and returns the name of the server reached. */
async function reach(
  ports: number[],
  extra: Options = {},
): Promise<string> {
  await using sql = postgres(`postgres://u@${hostList(ports)}/db`, {
    ...quiet,
    fetch_types: false,
    max: 1,
    ...extra,
  });
  const [row] = await sql`select 'whoami'`;
  return row.name as string;
}

/** Waits until no session stays open on the servers that were not chosen. */
async function closedExcept(fakes: Fake[], chosen: string): Promise<void> {
  const open = () => fakes.filter((f) => f.role.name !== chosen && f.open > 0);
  await poll(() => open().length === 0, 2000);
  assert.deepEqual(open().map((f) => f.role.name), [], "sessions left open");
}

const ROLES: Role[] = [
  { name: "primary" },
  { name: "readonly", readOnly: true },
  { name: "standby", standby: true },
];

for (const report of [true, false]) {
  Deno.test(
    `target_session_attrs picks the first matching server and closes the others (kind ${
      report ? "reported at startup" : "asked with a query"
    })`,
    async () => {
      await withFakes(ROLES.map((r) => ({ ...r, report })), async (fakes) => {
        const [p, ro, s] = fakes.map((f) => f.server.port);
        const cases: [number[], Options["target_session_attrs"], string][] = [
          [[p, ro, s], "any", "primary"],
          [[p, ro, s], "read-write", "primary"],
          [[p, ro, s], "read-only", "readonly"],
          [[p, ro, s], "primary", "primary"],
          [[p, ro, s], "standby", "standby"],
          [[p, ro, s], "prefer-standby", "standby"],
          [[s, ro, p], "any", "standby"],
          [[s, ro, p], "read-write", "primary"],
          [[s, ro, p], "read-only", "standby"],
          [[s, ro, p], "primary", "readonly"],
          [[ro, p], "prefer-standby", "readonly"], // no standby: the first of any kind
        ];
        for (const [ports, attrs, expected] of cases) {
          const asked = fakes.reduce((n, f) => n + f.asked, 0);
          const got = await reach(ports, { target_session_attrs: attrs });
          assert.equal(got, expected, `${attrs} over ${ports.join(",")}`);
          await closedExcept(fakes, "");
          const queries = fakes.reduce((n, f) => n + f.asked, 0) - asked;
          if (report || attrs === "any") assert.equal(queries, 0, "nothing asked");
          else assert.ok(queries > 0, "the kind was asked");
        }
      });
    },
  );
}

Deno.test("a rejected server's session is closed while the chosen one stays open", async () => {
  await withFakes(ROLES, async (fakes) => {
    const [p, ro, s] = fakes.map((f) => f.server.port);
    await using sql = postgres(`postgres://u@${hostList([s, ro, p])}/db`, {
      ...quiet,
      fetch_types: false,
      max: 1,
      target_session_attrs: "read-write",
    });
    assert.equal((await sql`select 'whoami'`)[0].name, "primary");
    await closedExcept(fakes, "primary");
    assert.equal(fakes[0].open, 1, "the primary's session is in use");
  });
});

Deno.test("unreachable hosts are skipped in order; an authentication failure stops the search", async () => {
  await withFakes([{ name: "a" }, { name: "b" }, { name: "refuses", refuse: "28P01" }], async (
    [a, b, refuses],
  ) => {
    assert.equal(await reach([deadPort(), a.server.port, b.server.port]), "a");
    assert.equal(b.accepted, 0, "b is not tried once a answered");
    const err = await reach([refuses.server.port, b.server.port]).catch((e) => e);
    assert.ok(err instanceof PostgresError, String(err));
    assert.equal(err.code, "28P01");
    assert.equal(b.accepted, 0, "the next host is not tried after an authentication failure");
  });
});

Deno.test("a server that never answers the kind check is given up at connect_timeout", async () => {
  await withFakes([
    { name: "silent", report: false, silent: true },
    { name: "primary" },
  ], async ([silent, p]) => {
    const started = Date.now();
    const got = await reach([silent.server.port, p.server.port], {
      target_session_attrs: "read-write",
      connect_timeout: 0.2,
    });
    assert.equal(got, "primary");
    assert.ok(Date.now() - started >= 190, "it waited for the check first");
    await closedExcept([silent], "");
  });
});

Deno.test("no server matches: NO_MATCHING_HOST names each host; none reachable: every reason", async () => {
  await withFakes([{ name: "standby", standby: true }], async ([s]) => {
    const dead = deadPort();
    const err = await reach([s.server.port, dead], { target_session_attrs: "read-write" })
      .catch((e) => e);
    assert.ok(err instanceof ConnectionError, String(err));
    assert.equal(err.code, "NO_MATCHING_HOST");
    assert.match(err.message, /target_session_attrs=read-write/);
    assert.match(err.message, new RegExp(`127.0.0.1:${s.server.port} is a standby`));
    assert.match(err.message, new RegExp(`127.0.0.1:${dead} failed`));
  });
  const [d1, d2] = [deadPort(), deadPort()];
  const err = await reach([d1, d2]).catch((e) => e);
  assert.ok(err instanceof ConnectionError, String(err));
  assert.equal(err.code, "ECONNREFUSED", "the code of the failures is kept");
  assert.match(err.message, new RegExp(`${d1}.*${d2}`));
});

Deno.test("load_balance_hosts=random spreads new connections over the hosts; disable keeps the first", async () => {
  await withFakes([{ name: "a" }, { name: "b" }, { name: "c" }], async (fakes) => {
    const ports = fakes.map((f) => f.server.port);
    const names = await Promise.all(
      Array.from({ length: 30 }, () => reach(ports, { load_balance_hosts: "random" })),
    );
    const counts = Object.fromEntries(["a", "b", "c"].map((n) => [n, 0]));
    for (const n of names) counts[n]++;
    // Each host is missed by all 30 with probability (2/3)^30, about 5e-6.
    for (const n of ["a", "b", "c"]) assert.ok(counts[n] > 0, JSON.stringify(counts));
    const ordered = await Promise.all(Array.from({ length: 10 }, () => reach(ports)));
    assert.deepEqual(new Set(ordered), new Set(["a"]));
  });
});

// ---------------------------------------------------------------------------------------------
// A real primary and a streaming replica

Deno.test({
  name:
    "primary and pg_basebackup replica: reads and writes route by target_session_attrs; failover after promotion",
  ignore: findPgBin() === null,
  async fn() {
    const primary = await startCluster({ name: "primary", replication: true });
    try {
      const replica = await startReplica(primary);
      try {
        const url = (attrs: string) =>
          `postgres://postgres@127.0.0.1:${replica.port},127.0.0.1:${primary.port}/postgres` +
          `?target_session_attrs=${attrs}`;
        const where = async (attrs: string) => {
          await using sql = postgres(url(attrs), { ...quiet, max: 1 });
          const [row] = await sql`
            select inet_server_port() as port, pg_is_in_recovery() as standby`;
          return { port: row.port as number, standby: row.standby as boolean };
        };
        const onPrimary = { port: primary.port, standby: false };
        const onReplica = { port: replica.port, standby: true };
        assert.deepEqual(await where("any"), onReplica, "any: the first listed");
        assert.deepEqual(await where("read-write"), onPrimary);
        assert.deepEqual(await where("primary"), onPrimary);
        assert.deepEqual(await where("read-only"), onReplica);
        assert.deepEqual(await where("standby"), onReplica);
        assert.deepEqual(await where("prefer-standby"), onReplica);
        {
          await using ro = postgres(url("read-only"), { ...quiet, max: 1 });
          const err = await ro`create table t (x int)`.catch((e) => e);
          assert.ok(err instanceof PostgresError, String(err));
          assert.equal(err.code, "25006", "read-only transaction");
        }

        // The read-write client reaches the standby through a recorder that counts its visits.
        const rec = flightRecorder({ hostname: "127.0.0.1", port: replica.port });
        try {
          const rwUrl = `postgres://postgres@127.0.0.1:${rec.port},127.0.0.1:${primary.port}/` +
            "postgres?target_session_attrs=read-write";
          await using rw = postgres(rwUrl, { ...quiet, max: 2, connect_timeout: 20 });
          await rw`create table before_failover (x int)`;
          const heard: string[] = [];
          await rw.listen("failover", (payload) => heard.push(payload));

          await primary.halt();
          const visits = rec.connections.length;
          const pending = rw`
            select inet_server_port() as port, pg_is_in_recovery() as standby`.execute();
          // Four more sessions on the standby, more than the client has connections (its pool's
          // two and its listener's): it looked at the standby and went on looking.
          await until(
            "four more sessions on the standby",
            () => rec.connections.length >= visits + 4,
          );
          assert.equal(
            await settledYet(pending),
            false,
            "the query waits while no server is the primary",
          );
          await replica.promote();
          const [row] = await within(pending, 15_000, "the query issued during failover");
          assert.deepEqual({ port: row.port, standby: row.standby }, {
            port: replica.port,
            standby: false,
          });
          await rw`insert into before_failover values (1)`;
          assert.equal((await rw`select count(*)::int as n from before_failover`)[0].n, 1);

          // The listener reconnects to the new primary too (notifications sent before it
          // listens again are lost, so keep sending until one arrives).
          await until(
            "the listener following the failover",
            async () => {
              await rw.notify("failover", "after");
              return heard.length > 0;
            },
            10_000,
            100,
          );
          assert.equal(heard[0], "after", "the listener follows the failover");
        } finally {
          await rec.close();
        }
      } finally {
        await replica.stop();
      }
    } finally {
      await primary.stop();
    }
  },
});

/** Options, URL, environment and .pgpass, and the pool lifetimes, against a real server. */
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { resolveOptions } from "../src/config/resolve.ts";
import { parseUrl } from "../src/config/url.ts";
import { HOST_KEYWORDS, type Keyword, KEYWORDS } from "../src/config/keywords.ts";
import { matchPgpass } from "../src/config/pgpass.ts";
import { databaseUrl, hasClusters, tlsCluster } from "./harness/env.ts";
import { withEnv } from "./harness/util.ts";
import { delay, until } from "./harness/wait.ts";
import { NETWORK, SERVER_PROCESS, serverTest, SEVERAL_SESSIONS } from "./harness/pglite_mode.ts";

const url = databaseUrl();
const quiet = { onnotice: () => {} };

Deno.test("URL: a password (or a query value) that is not valid percent-encoding is not quoted in the error", () => {
  for (
    const [url, where] of [
      ["postgres://u:s3cr%zzet@h/d", "the password"],
      ["postgres://u@h/d?sslpassword=s3cr%zzet", "the value of sslpassword"],
    ]
  ) {
    assert.throws(() => resolveOptions(url), (e: Error) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, new RegExp(`invalid percent-encoding in connection URL: ${where}`));
      assert.ok(!e.message.includes("s3cr"), e.message);
      return true;
    });
  }
  assert.throws(() => resolveOptions("postgres://u@h/d%zz"), /connection URL: d%zz/);
});

Deno.test("URL: credentials and names are percent-decoded; unknown keys become startup parameters", () => {
  const p = parseUrl(
    "postgres://us%40er:p%3Ass%2Fw@db.example:6543/my%20db?sslmode=require&search_path=app",
  );
  assert.equal(p.user, "us@er");
  assert.equal(p.password, "p:ss/w");
  assert.equal(p.host, "db.example");
  assert.equal(p.port, 6543);
  assert.equal(p.database, "my db");
  const r = resolveOptions(
    "postgresql://u@[::1]:5433/d?application_name=app%201&search_path=app&sslmode=disable",
  );
  assert.equal(r.host, "::1");
  assert.equal(r.port, 5433);
  assert.equal(r.params.application_name, "app 1");
  assert.equal(r.params.search_path, "app");
  assert.equal(r.sslmode, "disable");
  assert.equal("sslmode" in r.params, false);
  assert.throws(() => resolveOptions("mysql://x"), TypeError);
  assert.throws(() => resolveOptions("postgres://h:99999/d"), TypeError);
  assert.throws(() => resolveOptions("postgres://h/d?sslmode=sometimes"), TypeError);
  assert.equal(resolveOptions("postgres://h/d?host=/run/pg").host, "/run/pg");
});

/** A valid value of each keyword without a default (or whose default is no use here). */
const VALID: Record<string, string> = {
  host: "h",
  port: "5433",
  hostaddr: "127.0.0.1",
  passfile: "/nonexistent/pgpass",
  require_auth: "scram-sha-256,md5",
  client_encoding: "UTF8",
  keepalives_idle: "30",
  sslcert: "/nonexistent/client.crt",
  sslkey: "/nonexistent/client.key",
  sslcertmode: "disable", // so neither file above is read
  sslrootcert: "system",
  sslmode: "verify-full", // the only one sslrootcert=system allows
  ssl_max_protocol_version: "TLSv1.3",
  gsslib: "gssapi",
  scram_client_key: btoa("k".repeat(32)),
  scram_server_key: btoa("s".repeat(32)),
  // Refused but for their harmless values (libpq's defaults).
  keepalives_interval: "0",
  keepalives_count: "0",
  tcp_user_timeout: "0",
  replication: "false",
  sslcrl: "",
  sslcrldir: "",
  sslkeylogfile: "",
  requirepeer: "",
  oauth_issuer: "",
  oauth_client_id: "",
  oauth_client_secret: "",
  oauth_scope: "",
};

Deno.test("keywords: none reaches the server as a setting; the defaults with no source giving any", async () => {
  const rows = Object.entries(KEYWORDS) as [string, Keyword<unknown>][];
  const vars = rows.flatMap(([, row]) => row.env ?? []).concat(
    Object.values(HOST_KEYWORDS).map((h) => h.env),
  );
  await withEnv({ ...Object.fromEntries(vars.map((v) => [v, undefined])), USER: "me" }, () => {
    const texts: Record<string, string> = { ...VALID };
    for (const [name, row] of rows) {
      // A service needs a file (tested below); `options` is libpq's own startup parameter.
      if (name === "service" || name === "servicefile" || name === "options") continue;
      texts[name] ??= typeof row.default === "string" ? row.default : "1";
    }
    const query = Object.entries(texts).map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
    const all = resolveOptions(`postgres://x/d?${query.join("&")}`);
    assert.deepEqual(
      Object.keys(all.params).sort(),
      ["DateStyle", "application_name", "client_encoding", "database", "user"],
    );
    const r = resolveOptions(undefined);
    assert.deepEqual(
      [r.host, r.port, r.user, r.database, r.params.application_name, r.pass],
      ["localhost", 5432, "me", "me", "pgpipe", undefined],
    );
    assert.deepEqual(
      [r.targetSessionAttrs, r.loadBalanceHosts, r.protocolMinor, r.sslmode, r.sslnegotiation],
      ["any", "disable", 0, "prefer", "postgres"],
    );
    assert.deepEqual(
      [r.connectTimeout, r.max, r.maxPipeline, r.idleTimeout, r.queryTimeout],
      [30_000, 10, 1000, 0, 0],
    );
    assert.deepEqual([r.fetchTypes, r.prepare, r.publications, r.ca], [
      true,
      true,
      "alltables",
      undefined,
    ]);
    assert.ok(r.maxLifetime >= 30 * 60_000 && r.maxLifetime <= 60 * 60_000, `${r.maxLifetime}`);
  });
});

Deno.test("sslnegotiation: postgres by default; direct from the option, URL or PGSSLNEGOTIATION, only with a mode that never goes plain (libpq)", async () => {
  assert.equal(resolveOptions("postgres://h/d?sslmode=require").sslnegotiation, "postgres");
  const direct = resolveOptions("postgres://h/d?sslmode=verify-full&sslnegotiation=direct");
  assert.equal(direct.sslnegotiation, "direct");
  assert.equal("sslnegotiation" in direct.params, false, "not a startup parameter");
  assert.equal(
    resolveOptions("postgres://h/d", { ssl: "require", sslnegotiation: "direct" }).sslnegotiation,
    "direct",
  );
  await withEnv({ PGSSLNEGOTIATION: "direct", PGSSLMODE: "verify-ca" }, () => {
    assert.equal(resolveOptions("postgres://h/d").sslnegotiation, "direct");
  });
  for (const mode of ["disable", "allow", "prefer"]) {
    assert.throws(
      () => resolveOptions(`postgres://h/d?sslmode=${mode}&sslnegotiation=direct`),
      /sslnegotiation=direct needs sslmode require, verify-ca or verify-full/,
    );
  }
  assert.throws(() => resolveOptions("postgres://h/d?sslnegotiation=sometimes"), TypeError);
  const sql = postgres("postgres://h/d?sslmode=require&sslnegotiation=direct");
  assert.equal(sql.options.sslnegotiation, "direct");
  await sql.end();
});

Deno.test("environment: PG* variables fill what the URL and options leave out", async () => {
  await withEnv({
    PGHOST: "envhost",
    PGPORT: "7777",
    PGUSER: "envuser",
    PGPASSWORD: "envpass",
    PGDATABASE: "envdb",
    PGAPPNAME: "envapp",
    PGSSLMODE: "verify-full",
    PGCONNECT_TIMEOUT: "3",
  }, () => {
    const r = resolveOptions(undefined);
    assert.deepEqual(
      [r.host, r.port, r.user, r.password, r.database, r.params.application_name, r.sslmode],
      ["envhost", 7777, "envuser", "envpass", "envdb", "envapp", "verify-full"],
    );
    assert.equal(r.connectTimeout, 3000);
    const o = resolveOptions("postgres://urluser@urlhost/urldb", { port: 1234 });
    assert.deepEqual([o.host, o.port, o.user, o.database], ["urlhost", 1234, "urluser", "urldb"]);
  });
});

Deno.test("PGSSLROOTCERT is read only for a connection that may encrypt, and `system` reads no file", async () => {
  const missing = "/nonexistent/pgpipe-root.crt";
  await withEnv({ PGSSLROOTCERT: missing, PGSSLMODE: undefined }, () => {
    // sslmode=disable never encrypts, so a stale PGSSLROOTCERT must not break the client.
    const plain = resolveOptions("postgres://u@h/d?sslmode=disable");
    assert.equal(plain.sslmode, "disable");
    assert.throws(
      () => resolveOptions("postgres://u@h/d?sslmode=require"),
      (e) => e instanceof TypeError && e.message.includes(`cannot read sslrootcert ${missing}`),
    );
  });
  await withEnv({ PGSSLROOTCERT: "system", PGSSLMODE: undefined }, () => {
    const r = resolveOptions("postgres://u@h/d?sslmode=verify-full");
    assert.equal(r.sslmode, "verify-full");
  });
});

Deno.test("sslrootcert=system: sslmode defaults to verify-full and a weaker one is refused, as in libpq", async () => {
  await withEnv({ PGSSLMODE: undefined, PGSSLROOTCERT: undefined }, () => {
    assert.equal(resolveOptions("postgres://u@h/d?sslrootcert=system").sslmode, "verify-full");
    assert.equal(resolveOptions("postgres://u@h/d").sslmode, "prefer", "prefer without it");
    for (const mode of ["disable", "allow", "prefer", "require", "verify-ca"]) {
      assert.throws(
        () => resolveOptions(`postgres://u@h/d?sslmode=${mode}&sslrootcert=system`),
        (e) =>
          e instanceof TypeError &&
          e.message.includes(`sslmode=${mode} may not be used with sslrootcert=system`),
      );
    }
    assert.throws(() => resolveOptions("sslrootcert=system", { ssl: true }), /sslmode=require/);
  });
  await withEnv({ PGSSLMODE: undefined, PGSSLROOTCERT: "system" }, () => {
    assert.equal(resolveOptions("postgres://u@h/d").sslmode, "verify-full");
    assert.throws(() => resolveOptions("postgres://u@h/d?sslmode=require"), /sslrootcert=system/);
  });
  const c = tlsCluster();
  if (c === undefined) return;
  // The ssl object's CAs replace sslrootcert: its rule does not apply then.
  const own = resolveOptions("postgres://u@h/d?sslrootcert=system", {
    ssl: { ca: c.caCert!, rejectUnauthorized: false },
  });
  assert.equal(own.sslmode, "require");
  // Against the TLS cluster, whose certificate comes from a private CA: the system's roots do
  // not trust it, so the connection fails where it used to go on unverified (sslmode=prefer).
  const u = c.users.trust;
  const sql = postgres(
    `postgres://${u.user}@${c.host}:${c.port}/${c.database}?sslrootcert=system`,
    { ...quiet, connect_timeout: 5 },
  );
  try {
    await assert.rejects(sql`select 1`, (e: Error & { code?: string }) => {
      assert.equal(e.code, "SSL_FAILED", e.message);
      return true;
    });
  } finally {
    await sql.end();
  }
});

Deno.test(".pgpass: wildcards, escapes, first match wins, sockets match localhost", () => {
  const text = [
    "# comment",
    "other:5432:*:alice:nope",
    "db.example:5432:app:alice:s3cr\\:et\\\\x",
    "*:*:*:alice:fallback",
    "localhost:5433:*:bob:sock",
  ].join("\n");
  const t = { host: "db.example", port: 5432, database: "app", user: "alice" };
  assert.equal(matchPgpass(text, t), "s3cr:et\\x");
  assert.equal(matchPgpass(text, { ...t, database: "else" }), "fallback");
  assert.equal(matchPgpass(text, { host: "/tmp", port: 5433, database: "x", user: "bob" }), "sock");
  assert.equal(matchPgpass(text, { ...t, user: "carol" }), undefined);
});

Deno.test({
  name: ".pgpass supplies the password when none is given; a world-readable file is ignored",
  ignore: !hasClusters,
  async fn() {
    const c = tlsCluster()!;
    const u = c.users.scram;
    const dir = await Deno.makeTempDir();
    const file = `${dir}/pgpass`;
    try {
      const escaped = u.password.replaceAll("\\", "\\\\").replaceAll(":", "\\:");
      await Deno.writeTextFile(file, `127.0.0.1:${c.port}:*:${u.user}:${escaped}\n`, {
        mode: 0o600,
      });
      await Deno.chmod(file, 0o600);
      await withEnv({ PGPASSFILE: file, PGPASSWORD: undefined }, async () => {
        const target = {
          host: "127.0.0.1",
          port: c.port,
          user: u.user,
          database: c.database,
          ssl: "disable" as const,
          ...quiet,
        };
        await using sql = postgres(target);
        assert.equal((await sql`select current_user as u`)[0].u, u.user);
        await Deno.chmod(file, 0o644);
        await using loose = postgres(target);
        await assert.rejects(
          loose`select 1`,
          (e: Error & { code?: string }) => e.code === "AUTH_FAILED",
        );
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

serverTest(
  NETWORK,
  "without --allow-env or --allow-read the client still works from a URL",
  async () => {
    const script = await Deno.makeTempFile({ suffix: ".ts" });
    try {
      const mod = new URL("../mod.ts", import.meta.url).href;
      await Deno.writeTextFile(
        script,
        `import postgres from "${mod}";
const sql = postgres(${JSON.stringify(url)}, { max: 1, onnotice: () => {} });
const [{ x }] = await sql\`select 41 + 1 as x\`;
await sql.end();
console.log(x);`,
      );
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--no-prompt",
          "--allow-net",
          `--allow-read=${script}`,
          "--allow-import",
          script,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, stderr);
      assert.equal(new TextDecoder().decode(out.stdout).trim(), "42");
    } finally {
      await Deno.remove(script);
    }
  },
);

/** Runs `fn` on a client of its own, ended before this returns (one session at a time). */
async function admin<T>(fn: (sql: ReturnType<typeof postgres>) => Promise<T>): Promise<T> {
  await using sql = postgres(url, { max: 1, ...quiet });
  return await fn(sql);
}

async function backends(admin: ReturnType<typeof postgres>, app: string): Promise<number> {
  const [{ n }] =
    await admin`select count(*)::int as n from pg_stat_activity where application_name = ${app}`;
  return n as number;
}

serverTest(
  SERVER_PROCESS,
  "idle_timeout closes idle connections; they reopen on demand",
  async () => {
    await using admin = postgres(url, { max: 1, ...quiet });
    await using sql = postgres(url, {
      max: 1,
      idle_timeout: 0.2,
      application_name: "pgpipe_idle",
      ...quiet,
    });
    await sql`select 1`;
    assert.equal(await backends(admin, "pgpipe_idle"), 1);
    await until(
      "the idle connection closed",
      async () => await backends(admin, "pgpipe_idle") === 0,
    );
    assert.equal((await sql`select 2 as two`)[0].two, 2);
  },
);

serverTest(SERVER_PROCESS, "max_lifetime replaces an old connection once it is idle", async () => {
  await using sql = postgres(url, { max: 1, max_lifetime: 0.2, ...quiet });
  const [{ pid: first }] = await sql`select pg_backend_pid() as pid`;
  await delay(300); // past max_lifetime, idle
  const [{ pid: second }] = await sql`select pg_backend_pid() as pid`;
  assert.notEqual(second, first);
});

serverTest(
  SERVER_PROCESS,
  "max_lifetime closes an idle connection when it expires, without another query",
  async () => {
    await using admin = postgres(url, { max: 1, ...quiet });
    await using sql = postgres(url, {
      max: 1,
      max_lifetime: 0.2,
      connection: { application_name: "pgpipe_lifetime" },
      ...quiet,
    });
    await sql`select 1`;
    assert.equal(await backends(admin, "pgpipe_lifetime"), 1);
    await until(
      "the expired idle connection closed",
      async () => await backends(admin, "pgpipe_lifetime") === 0,
    );
    assert.equal((await sql`select 2 as two`)[0].two, 2);
  },
);

Deno.test("fetch_types: arrays of user-defined types decode into arrays", async () => {
  // One client at a time, so this runs on PGlite's one session too (--pg=pglite).
  await admin((a) => a`drop type if exists pgpipe_mood cascade`);
  await admin((a) => a`create type pgpipe_mood as enum ('sad', 'ok', 'happy')`);
  try {
    {
      await using sql = postgres(url, { max: 1, ...quiet });
      const [{ moods }] = await sql`select array['ok', 'happy']::pgpipe_mood[] as moods`;
      assert.deepEqual(moods, ["ok", "happy"]);
    }
    await using raw = postgres(url, { max: 1, fetch_types: false, ...quiet });
    const [{ moods: text }] = await raw`select array['ok', 'happy']::pgpipe_mood[] as moods`;
    assert.equal(text, "{ok,happy}");
  } finally {
    await admin((a) => a`drop type pgpipe_mood`);
  }
});

Deno.test("fetch_types: the first queries of a new connection, sent ahead of the catalog query, still decode its arrays", async () => {
  await admin((a) => a`drop type if exists pgpipe_tone cascade`);
  await admin((a) => a`create type pgpipe_tone as enum ('low', 'mid', 'high')`);
  const tones = "array['low', 'high']::pgpipe_tone[]";
  try {
    // Extended protocol: written before the catalog query, their rows wait for its types. Two
    // runs of one text (the second binds the first's statement), beside binary-decoded columns.
    {
      await using sql = postgres(url, { max: 1, ...quiet });
      const query = () =>
        sql.unsafe(`select ${tones} as t, 7::int4 as n, now() as at where $1::int = 1`, [1]);
      const [a, b, c] = await Promise.all([query(), query(), sql`select 1::int as one`]);
      for (const rows of [a, b]) {
        assert.deepEqual(rows[0].t, ["low", "high"]);
        assert.equal(rows[0].n, 7);
        assert.ok(rows[0].at instanceof Date);
      }
      assert.equal(c[0].one, 1);
      assert.equal(
        sql.options.parsers[(await sql`select 'pgpipe_tone[]'::regtype::oid::int as o`)[0].o] !==
          undefined,
        true,
      );
    }
    // A query issued once a first answer is in, while the catalog query may still be pending,
    // binding the statement a first query described before the types were known.
    {
      await using sql = postgres(url, { max: 1, ...quiet });
      const query = () => sql`select ${sql.unsafe(tones)} as t where ${1}::int = 1`;
      const first = query().execute();
      await sql`select 1 as one`;
      const [[late], [early]] = await Promise.all([query(), first]);
      assert.deepEqual(late.t, ["low", "high"]);
      assert.deepEqual(early.t, ["low", "high"]);
    }
    // A simple-protocol text or a cursor cannot wait: the catalog query goes first for them.
    {
      await using sql = postgres(url, { max: 1, ...quiet });
      const [[{ t }]] = await Promise.all([sql.unsafe(`select ${tones} as t`)]);
      assert.deepEqual(t, ["low", "high"]);
    }
    {
      await using sql = postgres(url, { max: 1, ...quiet });
      for await (
        const batch of sql.unsafe(`select ${tones} as t from generate_series(1, 3)`, [], {
          prepare: false,
        }).cursor(2)
      ) {
        for (const row of batch) assert.deepEqual(row.t, ["low", "high"]);
      }
    }
  } finally {
    await admin((a) => a`drop type pgpipe_tone`);
  }
});

Deno.test("debug sees each query as it is sent; close() is end()", async () => {
  const seen: [number, string, readonly unknown[]][] = [];
  const sql = postgres(url, { max: 1, debug: (c, q, p) => seen.push([c, q, p]), ...quiet });
  await sql`select ${5}::int as v`;
  assert.ok(seen.some(([c, q, p]) => c >= 1 && q === "select $1::int as v" && p[0] === "5"));
  await sql.close();
  await assert.rejects(
    sql`select 1`,
    (e: Error & { code?: string }) => e.code === "CONNECTION_ENDED",
  );
});

serverTest(
  SEVERAL_SESSIONS,
  "max: queries spread over connections, each still pipelining",
  async () => {
    await using sql = postgres(url, { max: 3, ...quiet });
    const rows = await Promise.all(
      Array.from({ length: 300 }, (_, i) => sql`select ${i}::int as i, pg_backend_pid() as pid`),
    );
    assert.deepEqual(rows.map((r) => r[0].i), Array.from({ length: 300 }, (_, i) => i));
    const pids = new Set(rows.map((r) => r[0].pid));
    assert.ok(pids.size >= 2 && pids.size <= 3, `${pids.size} connections used`);
  },
);

Deno.test("transforms do not reach the driver's own queries (fetch_types with a row transform)", async () => {
  await admin((a) => a`drop type if exists pgpipe_shape cascade`);
  await admin((a) => a`create type pgpipe_shape as enum ('round', 'square')`);
  try {
    await using sql = postgres(url, {
      max: 1,
      transform: {
        row: (row: Record<string, unknown>) => ({ wrapped: row }),
        value: (v: unknown) => v,
      },
      ...quiet,
    });
    const [row] = await sql`select array['round']::pgpipe_shape[] as shapes`;
    assert.deepEqual(row, { wrapped: { shapes: ["round"] } });
  } finally {
    await admin((a) => a`drop type pgpipe_shape`);
  }
});

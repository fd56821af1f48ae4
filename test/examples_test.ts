// The examples run as documented: the Deno.serve API over HTTP, the Deno Deploy handler called
// directly, and the COPY + cursor script, each twice: with DATABASE_URL against the test database
// (its tables in a schema of their own, through the search_path startup parameter, dropped at
// the end), and with no DATABASE_URL, on PGlite in memory, saying so in one line. On PGlite
// (--pg=pglite) only the second kind runs: there is no test database to point DATABASE_URL at.
import assert from "node:assert/strict";
import postgres from "./harness/postgres.ts";
import { databaseUrl, tlsCluster } from "./harness/env.ts";
import { serverTest } from "./harness/pglite_mode.ts";

/** Why the DATABASE_URL runs are left out on PGlite (their PGlite runs are the ones below). */
const NEEDS_URL =
  "an example pointed at a server through DATABASE_URL (its PGlite run is separate)";

/** The line an example prints when it runs on PGlite. */
const ON_PGLITE = "DATABASE_URL is not set: running on PGlite, in memory";

/** Runs fn with console.log's lines collected (and not shown); returns fn's value and them. */
async function logged<T>(fn: () => Promise<T>): Promise<{ value: T; lines: string[] }> {
  const lines: string[] = [];
  const original = console.log;
  console.log = (...args: unknown[]) => void lines.push(args.map(String).join(" "));
  try {
    return { value: await fn(), lines };
  } finally {
    console.log = original;
  }
}

const url = databaseUrl();
const quiet = { onnotice: () => {} };

/** The URL with search_path set to `schema`, so unqualified tables are created there. */
function inSchema(base: string, schema: string): string {
  return `${base}${base.includes("?") ? "&" : "?"}search_path=${schema}`;
}

/** Creates a fresh schema, runs fn, and drops the schema whatever happens. */
async function withSchema(schema: string, fn: () => Promise<void>): Promise<void> {
  await using admin = postgres(url, quiet);
  await admin`drop schema if exists ${admin(schema)} cascade`;
  await admin`create schema ${admin(schema)}`;
  try {
    await fn();
  } finally {
    await admin`drop schema if exists ${admin(schema)} cascade`;
  }
}

/** Runs fn with environment variables set (undefined: unset), then restores them. */
async function withEnv<T>(vars: Record<string, string | undefined>, fn: () => Promise<T>) {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, Deno.env.get(k)]));
  const apply = (values: Record<string, string | undefined>) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) Deno.env.delete(k);
      else Deno.env.set(k, v);
    }
  };
  apply(vars);
  try {
    return await fn();
  } finally {
    apply(saved);
  }
}

/** The JSON API of examples/http_users.ts, exercised over HTTP; ends the module's client. */
async function usersApi(app: typeof import("../examples/http_users.ts")): Promise<void> {
  const server = app.start({ port: 0, hostname: "127.0.0.1", onListen: () => {} });
  const base = `http://127.0.0.1:${server.addr.port}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(base + path, {
      method,
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  try {
    await app.migrate();

    const ada = await call("POST", "/users", { name: "Ada", email: "ada@example.com" });
    assert.equal(ada.status, 201);
    assert.equal(ada.body.name, "Ada");
    assert.equal(typeof ada.body.id, "number");
    assert.ok(!Number.isNaN(Date.parse(ada.body.created_at)));

    const two = await call("POST", "/users", [
      { name: "Alan", email: "alan@example.com" },
      { name: "Grace", email: "grace@example.com" },
    ]);
    assert.equal(two.status, 201);
    assert.deepEqual(two.body.map((u: { name: string }) => u.name), ["Alan", "Grace"]);

    // Refusals: duplicate email, check constraint, bad JSON, missing and unknown fields.
    assert.equal(
      (await call("POST", "/users", { name: "A", email: "ada@example.com" })).status,
      409,
    );
    assert.equal((await call("POST", "/users", { name: "B", email: "no-at-sign" })).status, 400);
    assert.equal((await call("POST", "/users", "{not json")).status, 400);
    assert.equal((await call("POST", "/users", { name: "C" })).status, 400);
    assert.equal(
      (await call("POST", "/users", { name: "D", email: "d@x", admin: true })).status,
      400,
    );
    assert.equal((await call("POST", "/users", [])).status, 400);

    // Concurrent requests share the module-level client (and its pipelined connections).
    const many = await Promise.all(
      Array.from(
        { length: 30 },
        (_, i) => call("POST", "/users", { name: `user ${i}`, email: `user${i}@example.com` }),
      ),
    );
    assert.deepEqual(many.map((r) => r.status), many.map(() => 201));
    assert.equal(new Set(many.map((r) => r.body.id)).size, 30);

    const stats = await call("GET", "/stats");
    assert.equal(stats.status, 200);
    assert.equal(stats.body.users, 33);
    assert.ok(!Number.isNaN(Date.parse(stats.body.latest)));

    const page = await call("GET", "/users?limit=2");
    assert.deepEqual(page.body.map((u: { name: string }) => u.name), ["Ada", "Alan"]);
    const next = await call("GET", `/users?limit=1&after=${page.body[1].id}`);
    assert.deepEqual(next.body.map((u: { name: string }) => u.name), ["Grace"]);
    // Bad input in the path or the query string is answered with a 400, never a 500.
    for (const path of ["/users?limit=-1", "/users?limit=abc", "/users?after=abc", "/users/abc"]) {
      const bad = await call("GET", path);
      assert.equal(bad.status, 400, path);
      assert.match(bad.body.error, /expected an integer/, path);
    }
    assert.equal((await call("GET", "/users/99999999999")).status, 400);

    const id = ada.body.id;
    assert.deepEqual((await call("GET", `/users/${id}`)).body, ada.body);
    const renamed = await call("PATCH", `/users/${id}`, { name: "Ada Lovelace" });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.name, "Ada Lovelace");
    assert.equal(renamed.body.email, "ada@example.com");
    assert.equal((await call("PATCH", `/users/${id}`, {})).status, 400);

    assert.equal((await call("DELETE", `/users/${id}`)).status, 204);
    assert.equal((await call("DELETE", `/users/${id}`)).status, 404);
    assert.equal((await call("GET", `/users/${id}`)).status, 404);
    assert.equal((await call("PATCH", `/users/${id}`, { name: "x" })).status, 404);

    assert.equal((await call("PUT", "/users")).status, 405);
    assert.equal((await call("GET", "/nowhere")).status, 404);
  } finally {
    await server.shutdown();
    await app.sql.end();
  }
}

serverTest(
  NEEDS_URL,
  "examples/http_users.ts: the JSON API over HTTP against the test database",
  async () => {
    await withSchema("pgpipe_example_http", async () => {
      // The module creates its `sql` at import time from DATABASE_URL.
      const app = await withEnv(
        { DATABASE_URL: inSchema(url, "pgpipe_example_http") },
        () => import("../examples/http_users.ts"),
      );
      await usersApi(app);
    });
  },
);

Deno.test("examples/http_users.ts: with no DATABASE_URL, the same API on PGlite", async () => {
  // A second instance of the module (the query makes it one), created with no DATABASE_URL.
  const { value: app, lines } = await logged(() =>
    withEnv({ DATABASE_URL: undefined }, () => import("../examples/http_users.ts?pglite"))
  );
  assert.deepEqual(lines, [ON_PGLITE]);
  assert.deepEqual(app.sql.options.host, ["pglite:memory"]);
  await usersApi(app);
});

/** The handler of examples/deploy_handler.ts, called directly; closes its client at the end. */
async function deployHandler(deploy: typeof import("../examples/deploy_handler.ts")) {
  const get = (path: string, method = "GET") =>
    deploy.handler(new Request(`http://deploy.test${path}`, { method }));
  try {
    const info = await (await get("/")).json();
    assert.match(info.version, /^\d+/);
    assert.equal(typeof info.tls, "boolean");

    // Concurrent hits on one page: the upsert counts each exactly once.
    const hits = await Promise.all(
      Array.from({ length: 10 }, () => get("/hits/home", "POST").then((r) => r.json())),
    );
    const counts = hits.map((h) => h.hits).sort((a, b) => a - b);
    assert.deepEqual(counts, Array.from({ length: 10 }, (_, i) => i + 1));
    await (await get("/hits/about", "POST")).body?.cancel();
    assert.deepEqual(await (await get("/hits/home")).json(), { page: "home", hits: 10 });
    assert.deepEqual(await (await get("/hits/never")).json(), { page: "never", hits: 0 });
    assert.deepEqual(await (await get("/hits")).json(), [
      { page: "home", hits: 10 },
      { page: "about", hits: 1 },
    ]);
    for (const bad of ["/hits/", "/hits/no%20spaces", `/hits/${"x".repeat(101)}`]) {
      const refused = await get(bad, "POST");
      assert.equal(refused.status, 400, bad);
      assert.match((await refused.json()).error, /page name/);
    }
    const missing = await get("/elsewhere");
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
  } finally {
    await deploy.close();
  }
}

serverTest(
  NEEDS_URL,
  "examples/deploy_handler.ts: the handler, called directly, with DATABASE_URL",
  async () => {
    const deploy = await import("../examples/deploy_handler.ts");
    await withSchema("pgpipe_example_deploy", async () => {
      const env = { DATABASE_URL: inSchema(url, "pgpipe_example_deploy"), DATABASE_CA: undefined };
      await withEnv(env, () => deployHandler(deploy));
    });
  },
);

Deno.test("examples/deploy_handler.ts: with no DATABASE_URL, the handler on PGlite", async () => {
  const deploy = await import("../examples/deploy_handler.ts");
  const { lines } = await logged(() =>
    withEnv({ DATABASE_URL: undefined, DATABASE_CA: undefined }, () => deployHandler(deploy))
  );
  assert.deepEqual(lines, [ON_PGLITE]);
});

const tls = tlsCluster();

Deno.test({
  name: "examples/deploy_handler.ts: TLS from the URL's sslmode, or verify-full with DATABASE_CA",
  ignore: tls === undefined,
  async fn() {
    const c = tls!;
    const deploy = await import("../examples/deploy_handler.ts");
    const base = `postgres://${c.users.scram.user}:${encodeURIComponent(c.users.scram.password)}` +
      `@localhost:${c.port}/${c.database}`;
    const tlsOn = async (env: Record<string, string | undefined>) =>
      await withEnv(env, async () => {
        try {
          const res = await deploy.handler(new Request("http://deploy.test/"));
          const body = await res.json();
          return res.status === 200 ? body.tls : body.error;
        } finally {
          await deploy.close();
        }
      });
    assert.equal(await tlsOn({ DATABASE_URL: `${base}?sslmode=require` }), true);
    assert.equal(await tlsOn({ DATABASE_URL: `${base}?sslmode=disable` }), false);
    assert.equal(await tlsOn({ DATABASE_URL: base, DATABASE_CA: c.caCert }), true);
    // A CA that did not sign the server's certificate: the connection is refused.
    const wrong = await withEnv({ DATABASE_URL: base, DATABASE_CA: c.otherCaCert }, async () => {
      const errors: unknown[] = [];
      const original = console.error;
      console.error = (e: unknown) => errors.push(e); // the handler logs the error it hides
      try {
        const res = await deploy.handler(new Request("http://deploy.test/"));
        return { status: res.status, body: await res.json(), errors };
      } finally {
        console.error = original;
        await deploy.close();
      }
    });
    assert.equal(wrong.status, 500);
    assert.deepEqual(wrong.body, { error: "database error" });
    assert.equal((wrong.errors[0] as { code?: string }).code, "SSL_FAILED");
  },
});

/** What examples/copy_cursor.ts's main() reports for 5000 readings in batches of 300. */
function checkSummary(
  summary: Awaited<ReturnType<typeof import("../examples/copy_cursor.ts").main>>,
) {
  assert.equal(summary.loaded, 5000);
  assert.equal(summary.batches, Math.ceil(5000 / 300));
  assert.equal(summary.largestBatch, 300);
  assert.deepEqual(summary.sensors.map((s) => s.sensor), [
    "east",
    "north",
    "roof",
    "south",
    "west",
  ]);
  assert.equal(summary.sensors.reduce((n, s) => n + s.readings, 0), 5000);

  // The server's CSV agrees with what JavaScript computed from the cursor's rows.
  const [header, ...lines] = summary.csv.trim().split("\n");
  assert.equal(header, "sensor,readings,min,max,mean");
  const server = lines.map((line) => line.split(","));
  assert.deepEqual(
    server.map((
      [sensor, readings, min, max],
    ) => [sensor, Number(readings), Number(min), Number(max)]),
    summary.sensors.map((s) => [s.sensor, s.readings, s.min, s.max]),
  );
  server.forEach(([, , , , mean], i) => {
    assert.ok(
      Math.abs(Number(mean) - summary.sensors[i].mean) < 0.0015,
      `${mean} vs ${summary.sensors[i].mean}`,
    );
  });
}

serverTest(NEEDS_URL, "examples/copy_cursor.ts: COPY in, cursor batches, COPY out", async () => {
  const { main } = await import("../examples/copy_cursor.ts");
  checkSummary(await main(url, 5000, 300));
});

Deno.test("examples/copy_cursor.ts: with no DATABASE_URL, the same script on PGlite", async () => {
  const { main } = await import("../examples/copy_cursor.ts");
  const { value, lines } = await logged(() => main(undefined, 5000, 300));
  assert.deepEqual(lines, [ON_PGLITE]);
  checkSummary(value);
});

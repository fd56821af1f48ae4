// deno-lint-ignore-file no-import-prefix no-explicit-any -- Drizzle and postgres.js are bench-only npm imports, pinned here
// A batch built in one tick: Drizzle's 50 concurrent selects on one connection (the orm suite's
// case), and 200 plain selects issued in one Promise.all, over postgres.js and over pgpipe builds
// given as `name=module` arguments (builds side by side in one process: the old and the new, or
// builds that differ in one constant). Rounds rotate over the drivers; prints per driver and case
// the median ms per batch, its 10th percentile and quartiles, and the process's CPU per batch
// (user + sys: the client's side only), as JSON lines.
// `deno run -A bench/probes/tick_batch.ts <url> [rounds] name=module...`
import process from "node:process";
import { eq } from "npm:drizzle-orm@0.45.4";
import { drizzle } from "npm:drizzle-orm@0.45.4/postgres-js";
import postgresJs from "npm:postgres@3.4.9";
import { SEED_SQL, users } from "../shared/orm_app.ts";
import { percentile, rotated, Samples } from "../shared/stats.ts";

const [url, roundsArg, ...builds] = Deno.args;
const rounds = Number(roundsArg ?? 40);
const SELECTS = 50;
/** The plain case's batch: pgpipe's own encoding of it overlaps the server's first answers. */
const BATCH = 200;

type Sql = ((strings: TemplateStringsArray, ...values: unknown[]) => Promise<any>) & {
  end(): Promise<void>;
};
const drivers: { name: string; sql: Sql }[] = [
  { name: "postgres.js", sql: postgresJs(url, { max: 1, onnotice: () => {} }) as any },
];
for (const build of builds) {
  const [name, specifier] = build.split("=");
  const { default: postgres } = await import(specifier);
  drivers.push({ name, sql: postgres(url, { max: 1, onnotice: () => {} }) });
}
for (const statement of SEED_SQL) await (drivers[0].sql as any).unsafe(statement);

const cases: Record<string, (sql: Sql, db: any, round: number) => Promise<unknown>> = {
  "Drizzle: 50 concurrent selects": (_sql, db, round) =>
    Promise.all(
      Array.from(
        { length: SELECTS },
        (_, i) => db.select().from(users).where(eq(users.id, 1 + (round * SELECTS + i) % 10_000)),
      ),
    ),
  [`${BATCH} selects issued in one tick`]: (sql, _db, round) =>
    Promise.all(
      Array.from({ length: BATCH }, (_, i) =>
        sql`select id, name, email from bench_http_users where id = ${
          1 + (round * BATCH + i) % 10_000
        }`),
    ),
};

const dbs = new Map(drivers.map((d) => [d.name, drizzle(d.sql as any, { schema: { users } })]));
const ms = new Samples();
const cpu = new Samples();
for (const [kase, run] of Object.entries(cases)) {
  for (const d of drivers) for (let i = 0; i < 10; i++) await run(d.sql, dbs.get(d.name), -1 - i);
  await rotated(rounds, drivers, async (d, round) => {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await run(d.sql, dbs.get(d.name), round);
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    ms.add(`${kase}/${d.name}`, wall);
    cpu.add(`${kase}/${d.name}`, (c.user + c.system) / 1000);
  });
}
for (const key of ms.keys()) {
  const [kase, driver] = key.split("/");
  const xs = ms.get(key)!;
  console.log(JSON.stringify({
    case: kase,
    driver,
    ms: percentile(xs, 50),
    p10: percentile(xs, 10),
    p25: percentile(xs, 25),
    p75: percentile(xs, 75),
    cpuMs: percentile(cpu.get(key)!, 50),
    vsPostgresJs: percentile(ms.get(`${kase}/postgres.js`)!, 50) / percentile(xs, 50),
  }));
}
await Promise.all(drivers.map((d) => d.sql.end()));

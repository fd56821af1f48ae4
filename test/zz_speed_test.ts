import mine from "../mod.ts";
import theirs from "/work/main/mod.ts";
import { tlsCluster } from "./harness/env.ts";

Deno.test("speed", async () => {
  const c = tlsCluster()!;
  const opts = { host: c.host, port: c.port, database: c.database, user: c.users.trust.user, ssl: "require" as const, max: 1, onnotice: () => {} };
  const clients = { mine: mine(opts), main: theirs(opts) };
  const times: Record<string, number[]> = { "mine copy": [], "main copy": [], "mine pipe": [], "main pipe": [] };
  for (const [k, sql] of Object.entries(clients)) {
    const r = await (sql as any)`select 1`;
    console.log(k, r.state.tls);
  }
  for (let round = 0; round < 6; round++) {
    const order = round % 2 ? ["mine", "main"] : ["main", "mine"];
    for (const k of order) {
      const sql = (clients as any)[k];
      let t = performance.now();
      let n = 0;
      for await (const b of sql.copyTo(sql.unsafe(`select g, repeat('x', 500) as pad from generate_series(1, 200000) g`))) n += b.length;
      times[`${k} copy`].push(performance.now() - t);
      t = performance.now();
      await Promise.all(Array.from({ length: 20000 }, (_, i) => sql`select ${i}::int as i, repeat('y', 200) as p`));
      times[`${k} pipe`].push(performance.now() - t);
    }
  }
  for (const [k, v] of Object.entries(times)) {
    v.sort((a, b) => a - b);
    console.log(k, "median", v[3].toFixed(0), "ms; all", v.map((x) => x.toFixed(0)).join(" "));
  }
  await clients.mine.end(); await clients.main.end();
});

import { databaseUrl } from "./harness/env.ts";
import { record, runCase, SCENARIOS } from "./harness/replay_fuzz.ts";
import { typeOf } from "./harness/fake_server.ts";
Deno.test({
  name: "t",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const c = JSON.parse(Deno.env.get("CASE")!);
    const rec = await record(databaseUrl(), SCENARIOS[c.scenario]);
    console.log(rec.messages.map((m) => typeOf(m.bytes) + m.after).join(" "));
    const orig = SCENARIOS[c.scenario];
    const traced = (sql: any, notes: string[]) =>
      orig(sql, notes).map((p, i) =>
        p.then((v) => {
          console.log("step", i, "ok", performance.now() | 0);
          return v;
        }, (e) => {
          console.log("step", i, "err", e?.code, e?.message, performance.now() | 0);
          throw e;
        })
      );
    console.log(await runCase(rec, traced, c, []));
  },
});

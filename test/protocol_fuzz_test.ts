// The protocol fuzz (harness/replay_fuzz.ts): sessions of every request kind recorded against
// the test server, replayed by a fake server that breaks one message per session, chosen by a
// seed. No case may hang, leak an unhandled rejection, or resolve a query with wrong data from
// a duplicated, dropped or retyped message, a truncation or a hang-up. `deno task soak
// --variant=protocol` runs thousands of cases; a failing case prints its seed to run it alone.
import assert from "node:assert/strict";
import { databaseUrl } from "./harness/env.ts";
import { NETWORK, serverTest } from "./harness/pglite_mode.ts";
import {
  AUTH_METHODS,
  fuzz,
  recordAll,
  type Recording,
  runCase,
  SCENARIOS,
} from "./harness/replay_fuzz.ts";

/** The seed of the normal run's cases (PGPIPE_FUZZ_SEED overrides it to reproduce another). */
const SEED = Number(Deno.env.get("PGPIPE_FUZZ_SEED") ?? 0x5eed0039);
const CASES = Number(Deno.env.get("PGPIPE_FUZZ_CASES") ?? 300);

let recordings: Promise<Record<string, Recording>> | null = null;
const recorded = () => recordings ??= recordAll(databaseUrl());

serverTest(
  NETWORK,
  "protocol fuzz: every recorded session, replayed unbroken under each authentication, gives the real server's answers",
  async () => {
    const recs = await recorded();
    const unhandled: unknown[] = [];
    for (const [name, rec] of Object.entries(recs)) {
      assert.ok(rec.messages.length > 0, `${name}: nothing recorded`);
      for (const auth of AUTH_METHODS) {
        const o = await runCase(rec, SCENARIOS[name], {
          scenario: name,
          auth,
          mutation: null,
          at: 0,
          seed: 1,
        }, unhandled);
        assert.equal(o.verdict, "ok", `${name} under ${auth}: ${o.verdict} ${o.detail}`);
      }
    }
  },
);

serverTest(
  NETWORK,
  `protocol fuzz: ${CASES} seeded cases (seed ${
    SEED.toString(16)
  }): no wrong data from a broken sequence, no hang, no unhandled rejection`,
  async () => {
    const { table, bugs } = await fuzz(await recorded(), SEED, CASES);
    console.log(JSON.stringify(table));
    assert.deepEqual(bugs, []);
    const total = Object.values(table).reduce((n, row) => n + row.rejected, 0);
    assert.ok(total > 0, "no case was rejected: the mutations did not reach the driver");
  },
);

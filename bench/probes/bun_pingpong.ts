// Bun's floor for a serial TLS round trip: `bun bench/probes/bun_pingpong.ts SESSION HOST PORT
// COUNT` replays pgpipe's session captured by bench/peers/pingpong.ts (JSON: startup, set-up
// requests, last the steady `select 1`) over node:tls as NodeTlsPingPong does in Deno, times COUNT
// round trips of the last and prints `{"meanUs":…,"p50Us":…}`. Beside the same replay in Deno it
// tells how much of a serial gap between Bun.sql and pgpipe is the runtimes' own.
import { NodeTlsPingPong } from "../peers/pingpong.ts";
import { mean, percentile } from "../shared/stats.ts";
import type { BunApi } from "./bun_api.ts";

const Bun = (globalThis as unknown as { Bun: BunApi }).Bun;
const [sessionFile, host, port, count] = Bun.argv.slice(2);
const saved = JSON.parse(await Bun.file(sessionFile).text());
const session = {
  startup: Uint8Array.from(saved.startup as number[]),
  requests: saved.requests.map((r: { bytes: number[]; types: string }) => ({
    ...r,
    bytes: Uint8Array.from(r.bytes),
  })),
};
const steady = session.requests[session.requests.length - 1].bytes;
const p = await NodeTlsPingPong.open(host, Number(port), session);
try {
  for (let i = 0; i < 500; i++) await p.roundTrip(steady); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < Number(count); i++) {
    const t0 = performance.now();
    await p.roundTrip(steady);
    samples.push((performance.now() - t0) * 1000);
  }
  console.log(JSON.stringify({ meanUs: mean(samples), p50Us: percentile(samples, 50) }));
} finally {
  p.close();
}

// Bun's floor for a serial TLS round trip: `bun bench/probes/bun_pingpong.ts SESSION HOST PORT
// COUNT` replays pgpipe's session captured by bench/peers/pingpong.ts (JSON: startup, set-up
// requests, last the steady `select 1`) over node:tls as NodeTlsPingPong does in Deno, times COUNT
// round trips of the last and prints `{"meanUs":…,"p50Us":…}`. Beside the same replay in Deno it
// tells how much of a serial gap between Bun.sql and pgpipe is the runtimes' own.
import { NodeTlsPingPong, serialFloor, type WireSession } from "../peers/pingpong.ts";
import { Bun } from "./bun_api.ts";

const [sessionFile, host, port, count] = Bun.argv.slice(2);
// The session's bytes were written as arrays of numbers.
const bytes = (k: string, v: number[]) => k === "startup" || k === "bytes" ? Uint8Array.from(v) : v;
const session: WireSession = JSON.parse(await Bun.file(sessionFile).text(), bytes);
const steady = session.requests[session.requests.length - 1].bytes;
const p = await NodeTlsPingPong.open(host, Number(port), session);
try {
  console.log(JSON.stringify(await serialFloor(p, steady, Number(count))));
} finally {
  p.close();
}

// The benchmark's shared helpers (no server, no timing): the probe runner, the CPU accounting and
// its fallback, the table printer and report, and the parsers (wrk's output, /proc lines, a V8
// CPU profile, a captured frontend session, a SCRAM login's flights).
import assert from "node:assert/strict";
import {
  cpuMs,
  fromSchedstats,
  parseSchedstat,
  parseStat,
  statCpuMs,
  threadCpu,
  threadCpuSince,
  totalCpuMs,
} from "../bench/shared/cpu.ts";
import { type CpuProfile, summarizeProfile } from "../bench/shared/cpu_profile.ts";
import { parseWrk, parseWrkDuration } from "../bench/shared/loadgen.ts";
import { inRepo, lastJson, probe, run, spawn } from "../bench/shared/probe.ts";
import { renderSuite, renderTable, Report, summaryTable, table } from "../bench/shared/report.ts";
import { targetFor } from "../bench/shared/targets.ts";
import { splitSession } from "../bench/peers/pingpong.ts";
import { loginTrips } from "../bench/shared/login_flights.ts";

const deno = Deno.execPath();

Deno.test("bench: the probe runner returns a program's last JSON line", async () => {
  const out = await run(deno, [
    "eval",
    "console.log('warming up'); console.log(JSON.stringify({ x: 1 }))",
  ]);
  assert.deepEqual(lastJson(out), { x: 1 });
  // A probe of bench/probes/ under Deno: Deno's own peak RSS, from /proc/self/status.
  const idle = await probe<{ peakRss: number }>("idle.ts", []);
  assert.ok(idle.peakRss > 1 << 20, `peak RSS ${idle.peakRss}`);
  assert.throws(() => lastJson("no json here"), /expected a JSON line last, got: no json here/);
});

Deno.test("bench: a failing program's error names it, its exit code and its stderr", async () => {
  const probeFile = new URL("../bench/probes/idle.ts", import.meta.url).pathname;
  await assert.rejects(
    run(deno, ["eval", "console.error('boom from the probe'); Deno.exit(3)", probeFile]),
    (e: Error) => {
      // The program by its name and the repository file by its path in the repository.
      assert.match(e.message, /^deno bench\/probes\/idle\.ts: exit 3: boom from the probe$/);
      assert.ok(!e.message.includes(probeFile), e.message);
      return true;
    },
  );
  const slow = await spawn(deno, ["eval", "await new Promise((r) => setTimeout(r, 20000))"], {
    timeoutMs: 300,
  });
  assert.equal(slow.timedOut, true);
  assert.notEqual(slow.code, 0);
  await assert.rejects(
    run(deno, ["eval", "await new Promise((r) => setTimeout(r, 20000))"], {
      timeoutMs: 300,
    }),
    /did not finish within 0.3 s/,
  );
  const root = new URL("..", import.meta.url).pathname;
  assert.equal(
    inRepo(`at file://${root}src/mod.ts:3 and ${root}bench/run.ts`),
    "at src/mod.ts:3 and bench/run.ts",
  );
});

Deno.test("bench: CPU accounting sums schedstat per thread, else falls back to stat ticks", () => {
  assert.deepEqual(parseSchedstat("1500000 250000 7\n"), { cpu: 1.5, wait: 0.25 });
  const threads = fromSchedstats("4000000 1000000 3", [
    "1000000 0 1",
    undefined,
    "2000000 500000 2",
  ]);
  // A thread that ended between the listing and its read (undefined) is left out.
  assert.deepEqual(threads, { main: { cpu: 4, wait: 1 }, others: { cpu: 3, wait: 0.5 } });
  assert.equal(fromSchedstats(undefined, ["1 2 3"]), undefined);
  const stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 10 0 0 0 123 45 6 7 20 0";
  assert.equal(totalCpuMs(threads, stat), 7); // schedstat where there is one
  assert.equal(totalCpuMs(undefined, stat), (123 + 45) * 10); // else utime + stime, 10 ms ticks
  assert.equal(totalCpuMs(undefined, undefined), undefined); // no such process
  assert.equal(statCpuMs(stat, true), (6 + 7) * 10); // ended children: cutime + cstime
});

Deno.test("bench: this process's CPU, read from its threads, grows with the work it does", () => {
  const before = threadCpu()!;
  const total = cpuMs()!;
  assert.ok(before.main.cpu > 0 && total >= before.main.cpu);
  // Work until the accounting shows 50 ms more (a wall-clock loop would be a timed test: on a
  // busy machine the process may get little of the CPU in any given window).
  const deadline = performance.now() + 60_000;
  let x = 0;
  while (cpuMs()! - total < 50 && performance.now() < deadline) {
    for (let i = 0; i < 1e5; i++) x += Math.sqrt(i);
  }
  const spent = threadCpuSince(before)!;
  const grown = cpuMs()! - total;
  assert.ok(x > 0 && grown >= 50, `grew ${grown} ms`);
  // Under deno test the JavaScript may run on a thread other than the process's first one.
  // Read after the loop ended on cpuMs's 50 ms, the threads' sum has at least as much.
  const threads = spent.main.cpu + spent.others.cpu;
  assert.ok(threads >= 50 && threads < 60_000, `threads ${threads} ms, total ${grown} ms`);
  assert.ok(spent.main.wait >= 0 && spent.others.wait >= 0);
});

Deno.test("bench: tables print as aligned Markdown, and a report gathers its figures", () => {
  const t = table("Speed", "driver | q/s | pgpipe vs it", [["pgpipe", "1,000", "1.00x"], [
    "pg",
    "50",
    "20.00x",
  ]]);
  assert.deepEqual(t.head, ["driver", "q/s", "pgpipe vs it"]);
  assert.equal(
    renderTable(t),
    [
      "### Speed",
      "",
      "| driver | q/s   | pgpipe vs it |".replace("| q/s   |", "|   q/s |"),
      "|--------|------:|-------------:|",
      "| pgpipe | 1,000 |        1.00x |",
      "| pg     |    50 |       20.00x |",
    ].join("\n"),
  );
  const report = new Report("driver");
  report.table("Speed", ["driver", "q/s"], [["pgpipe", "1"]]);
  report.ratio("insert n=200", "postgres.js", 4);
  report.ratio("insert n=200", "deno-postgres", NaN, "cannot (no pipelining)");
  report.measure("overhead", "raw", 12.34, "µs");
  report.note("a note", "");
  assert.deepEqual(report.ratios.map((r) => [r.suite, r.peer, r.cannot]), [
    ["driver", "postgres.js", undefined],
    ["driver", "deno-postgres", "cannot (no pipelining)"],
  ]);
  assert.equal(
    renderSuite(report),
    "\n### Speed\n\n| driver | q/s |\n|--------|----:|\n| pgpipe |   1 |\n\n- a note",
  );
  // The summary puts each ratio beside its target (pipelined inserts: at least 3.5x postgres.js).
  const summary = summaryTable(report.ratios, report.measures);
  assert.deepEqual(summary.rows, [
    ["driver: insert n=200", "postgres.js", "4.00x", ">= 3.5x", "met"],
    ["driver: insert n=200", "deno-postgres", "cannot (no pipelining)", "", ""],
    ["driver: overhead", "raw", "12.3 µs", "", ""],
  ]);
});

Deno.test("bench: a goal applies to plaintext, to the TLS twin, or to both", () => {
  // driver's insert target is plaintext only; the orm targets apply to both twins.
  assert.equal(targetFor("driver", "insert n=200", "postgres.js")?.min, 3.5);
  assert.equal(targetFor("driver", "insert n=200 (TLS)", "postgres.js"), undefined);
  for (const suffix of ["", " (TLS)"]) {
    const drizzle = `Drizzle: 50 concurrent selects, 1 connection${suffix}`;
    assert.equal(targetFor("orm", drizzle, "postgres.js")?.min, 4);
    const kysely = `Kysely, pgpipe's dialect: 200 concurrent inserts, 1 connection${suffix}`;
    assert.equal(targetFor("orm", kysely, "kysely-postgres-js + postgres.js")?.min, 3);
  }
  // The default pool is shown beside the targets, not held to them.
  assert.equal(
    targetFor("orm", "Drizzle: 50 concurrent selects, 10 connections", "postgres.js"),
    undefined,
  );
});

// Printed by wrk 4.1.0 (Debian) against a path the server answers with 404.
const WRK_OUTPUT = `Running 1s test @ http://127.0.0.1:40273/nothing
  1 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     0.91ms    1.49ms  13.30ms   91.30%
    Req/Sec    18.59k     5.01k   28.00k    72.73%
  Latency Distribution
     50%  460.00us
     75%  664.00us
     90%    2.05ms
     99%    8.23ms
  20355 requests in 1.10s, 2.54MB read
  Non-2xx or 3xx responses: 20355
Requests/sec:  18508.40
Transfer/sec:      2.31MB
`;

Deno.test("bench: wrk's output is read into requests, seconds, percentiles and errors", () => {
  const r = parseWrk(WRK_OUTPUT);
  assert.equal(r.requests, 20355);
  assert.equal(r.seconds, 1.1);
  assert.equal(r.p50Ms, 0.46);
  assert.equal(r.p99Ms, 8.23);
  assert.equal(r.errors, 20355);
  const withSocketErrors = WRK_OUTPUT.replace(
    / {2}Non-2xx.*\n/,
    "  Socket errors: connect 1, read 2, write 3, timeout 4\n",
  );
  assert.equal(parseWrk(withSocketErrors).errors, 10);
  assert.throws(() => parseWrk("unable to connect to 127.0.0.1:1 Connection refused"), /wrk/);
});

Deno.test("bench: wrk durations in every unit it prints", () => {
  assert.equal(parseWrkDuration("512.5us"), 0.5125);
  assert.equal(parseWrkDuration("1.20ms"), 1.2);
  assert.equal(parseWrkDuration("2.00s"), 2000);
  assert.equal(parseWrkDuration("1.50m"), 90_000);
  assert.throws(() => parseWrkDuration("3h"), /not a wrk duration/);
});

Deno.test("bench: /proc stat fields are counted after the command name, spaces and all", () => {
  const { comm, fields: f } = parseStat(
    "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 10 0 0 0 123 45 6 7 20 0",
  );
  assert.equal(comm, "a (b) c");
  assert.equal(f[0], "S");
  assert.equal(f[11], "123"); // utime
  assert.equal(f[12], "45"); // stime
  assert.equal(f[13], "6"); // cutime
  assert.equal(f[14], "7"); // cstime
});

Deno.test("bench: a CPU profile is summed by category, inclusively and by function", () => {
  const frame = (functionName: string, url: string, lineNumber = 0) => ({
    functionName,
    url,
    lineNumber,
    columnNumber: 0,
  });
  const profile: CpuProfile = {
    nodes: [
      { id: 1, callFrame: frame("(root)", ""), children: [2, 3, 6] },
      { id: 2, callFrame: frame("(idle)", "") },
      { id: 3, callFrame: frame("query", "file:///repo/src/q.ts", 9), children: [4] },
      { id: 4, callFrame: frame("decode", "ext:deno_web/text.js"), children: [5] },
      { id: 5, callFrame: frame("op_decode", "") },
      { id: 6, callFrame: frame("handler", "file:///repo/bench/app.ts") },
    ],
    // Each sample's time is the delta that follows it; the last sample gets none.
    samples: [2, 3, 4, 5, 6, 3, 2],
    timeDeltas: [0, 1000, 2000, 3000, 4000, 5000, 6000],
  };
  const classify = (url: string, name: string) =>
    url.includes("/src/") ? "driver" : url.includes("/bench/") ? "bench" : url ? "runtime" : name;
  const s = summarizeProfile(profile, classify, {
    inclusiveCategory: "driver",
    top: 3,
    shorten: (u) => u.replace("file:///repo/", ""),
  });
  assert.equal(s.totalMs, 21); // 1 + 2 + 3 + 4 + 5 + 6 + 0
  assert.equal(s.idleMs, 1); // the first (idle) sample; the last one gets no time
  assert.equal(s.busyMs, 20);
  assert.deepEqual(s.categories, [
    { category: "driver", ms: 8 }, // query: 2 + 6
    { category: "bench", ms: 5 },
    { category: "op_decode", ms: 4 },
    { category: "runtime", ms: 3 },
  ]);
  assert.equal(s.inclusiveMs, 15); // query, and decode and op_decode under it
  assert.deepEqual(s.top.map((f) => [f.name, f.location, f.ms]), [
    ["query", "src/q.ts:10", 8],
    ["handler", "bench/app.ts:1", 5],
    ["op_decode", "", 4],
  ]);
});

/** A frontend message: type byte, int32 length (itself included), body. */
function message(type: string, body: number[] = []): number[] {
  const n = body.length + 4;
  return [type.charCodeAt(0), n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255, ...body];
}

Deno.test("bench: a captured session splits into startup and Sync-terminated requests", () => {
  const startup = [0, 0, 0, 12, 0, 3, 0, 0, 117, 0, 0, 0]; // length 12, protocol 3.0, "u\0\0\0"
  const first = [...message("P", [0, 0]), ...message("B", [1]), ...message("E"), ...message("S")];
  const steady = [...message("B", [1]), ...message("E"), ...message("S")];
  const stream = new Uint8Array([...startup, ...first, ...steady, ...message("X")]);
  const s = splitSession(stream);
  assert.deepEqual([...s.startup], startup);
  assert.deepEqual(s.requests.map((r) => r.types), ["PBES", "BES"]); // Terminate dropped
  assert.deepEqual([...s.requests[1].bytes], steady);

  const ssl = new Uint8Array([0, 0, 0, 8, 4, 210, 22, 47]); // SSLRequest
  assert.throws(() => splitSession(ssl), /sslmode=disable/);
  assert.throws(() => splitSession(stream.subarray(0, stream.length - 3)), /truncated/);
});

Deno.test("bench: a SCRAM login's flights are named by their place, up to the goodbye", () => {
  const hello = ["SSLRequest", "ClientHello", "ClientHello again"];
  // Verified: the query rides with SCRAM's final message.
  assert.deepEqual(
    loginTrips([...hello, "encrypted 205 B", "encrypted 77 B", "encrypted 339 B", "goodbye"]),
    [...hello, "Finished+startup", "SCRAM first", "SCRAM final+query"],
  );
  // Unverified, plus a catalog query first (postgres.js): every flight after the login is a
  // query, and what follows the goodbye is not counted.
  assert.deepEqual(
    loginTrips([
      "ClientHello",
      ...["encrypted 1 B", "encrypted 2 B", "encrypted 3 B", "encrypted 4 B", "encrypted 5 B"],
      "goodbye",
      "encrypted 24 B",
    ]),
    ["ClientHello", "Finished+startup", "SCRAM first", "SCRAM final", "query", "query"],
  );
});

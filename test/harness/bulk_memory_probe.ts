// Run by test/bulk_copy_test.ts in a fresh process, so its peak RSS is this load's alone:
// `deno run -A test/harness/bulk_memory_probe.ts <url> <rows>`. Loads <rows> rows from an async
// generator with sql.copyFrom into an unlogged table, reads them back with sql.copyTo, sampling
// RSS every tenth of the way; prints one JSON line with the counts, the samples and VmHWM after
// the load and at the end.
import postgres from "../../mod.ts";

const [url, rowsText] = Deno.args;
const total = Number(rowsText);
const table = `bulk_memory_${crypto.randomUUID().slice(0, 8)}`;
const step = Math.max(1, Math.floor(total / 10));

function peakRss(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) * 1024;
}

const loadRss: number[] = [];
const base = Date.UTC(2024, 0, 1);

/** The rows, made one at a time as COPY asks for them. */
async function* rows() {
  for (let i = 0; i < total; i++) {
    if (i % step === 0) loadRss.push(Deno.memoryUsage().rss);
    yield [i, `name ${i}`, new Date(base + i * 1000), i / 4, i % 2 === 0, { n: i, tag: "x" }];
  }
}

const sql = postgres(url, { max: 1, onnotice: () => {} });
const readRss: number[] = [];
try {
  await sql`create unlogged table ${sql(table)}
    (id int8, name text, at timestamptz, score float8, flag bool, meta jsonb)`;
  const loaded = await sql.copyFrom(table, rows());
  const loadPeakRss = peakRss(); // the high-water mark so far: the load's
  const [{ stored }] = await sql`select count(*)::int as stored from ${sql(table)}`;
  let read = 0;
  let next = 0;
  for await (const batch of sql.copyTo(table)) {
    read += batch.length;
    if (read >= next) {
      readRss.push(Deno.memoryUsage().rss);
      next += step;
    }
  }
  console.log(
    JSON.stringify({ loaded, stored, read, loadRss, readRss, loadPeakRss, peakRss: peakRss() }),
  );
} finally {
  await sql`drop table if exists ${sql(table)}`;
  await sql.end();
}

/**
 * A script: bulk-load sensor readings with `COPY ... FROM STDIN`, read them back through a
 * cursor in bounded batches, and export a per-sensor summary with `COPY ... TO STDOUT` as CSV.
 *
 * ```sh
 * deno run --allow-env --allow-read examples/copy_cursor.ts 100000   # no server: PGlite
 * DATABASE_URL=postgres://app:secret@localhost:5432/app \
 *   deno run --allow-net --allow-env examples/copy_cursor.ts 100000
 * ```
 *
 * The argument is how many readings to generate (default 100,000). The table is temporary, so
 * nothing is left behind. Without `DATABASE_URL` it runs on PGlite, a PostgreSQL inside this
 * process, in memory (PGlite reads its own files: `--allow-read`).
 *
 * @module
 */

// In your project: import postgres from "jsr:@pgpipe/pgpipe";
import postgres from "../mod.ts";
// In your project: import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
import { pglite } from "../pglite.ts";

/** Per-sensor figures computed from the cursor's batches. */
export interface SensorStats {
  sensor: string;
  readings: number;
  min: number;
  max: number;
  mean: number;
}

/** What one run did. */
export interface Summary {
  /** Rows in the table after the COPY. */
  loaded: number;
  /** Batches the cursor delivered. */
  batches: number;
  /** The largest batch seen (never more than the batch size asked for). */
  largestBatch: number;
  /** Computed in JavaScript from the cursor's rows, by sensor name (mean to 3 decimals). */
  sensors: SensorStats[];
  /** The server's own summary, exported with COPY TO STDOUT. */
  csv: string;
}

const SENSORS = ["north", "east", "south", "west", "roof"];

/**
 * COPY's text format, a few thousand lines per chunk: tab-separated columns, one row a line.
 * The values come from a small deterministic generator, so every run loads the same data.
 */
async function* readings(count: number): AsyncGenerator<string> {
  const start = Date.UTC(2025, 0, 1);
  let seed = 42; // MINSTD: seed = seed * 48271 mod (2^31 - 1)
  let chunk = "";
  for (let i = 0; i < count; i++) {
    seed = (seed * 48271) % 2147483647;
    const sensor = SENSORS[i % SENSORS.length];
    const takenAt = new Date(start + i * 1000).toISOString();
    const value = (15 + (seed / 2147483647) * 10).toFixed(3);
    chunk += `${sensor}\t${takenAt}\t${value}\n`;
    if (chunk.length > 64 * 1024) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk) yield chunk;
}

/** Runs the whole script against `url`, or PGlite in memory when it is undefined. */
export async function main(
  url: string | undefined,
  count = 100_000,
  batchSize = 1000,
): Promise<Summary> {
  if (url === undefined) console.log("DATABASE_URL is not set: running on PGlite, in memory");
  // One connection: the temporary table lives on it. `await using` ends the client at the end.
  await using sql = url === undefined ? postgres(pglite()) : postgres(url, { max: 1 });
  await sql`
    create temporary table readings (
      id bigint generated always as identity primary key,
      sensor text not null,
      taken_at timestamptz not null,
      value float8 not null
    )`;

  // COPY FROM STDIN as a Web WritableStream (`writable()` gives a Node Writable instead);
  // pipeTo applies backpressure and closes it at the end, which completes the COPY.
  const writable = await sql`copy readings (sensor, taken_at, value) from stdin`.writableStream();
  await ReadableStream.from(readings(count)).pipeTo(writable);
  const [{ loaded }] = await sql`select count(*)::int as loaded from readings`;

  // A cursor: at most `batchSize` rows in memory at a time, however large the table.
  const bySensor = new Map<string, { n: number; min: number; max: number; sum: number }>();
  let batches = 0;
  let largestBatch = 0;
  const cursor = sql<{ sensor: string; value: number }[]>`
    select sensor, value from readings order by id`.cursor(batchSize);
  for await (const rows of cursor) {
    batches++;
    largestBatch = Math.max(largestBatch, rows.length);
    for (const { sensor, value } of rows) {
      const s = bySensor.get(sensor) ?? { n: 0, min: Infinity, max: -Infinity, sum: 0 };
      s.n++;
      s.min = Math.min(s.min, value);
      s.max = Math.max(s.max, value);
      s.sum += value;
      bySensor.set(sensor, s);
    }
  }
  const sensors = [...bySensor].sort(([a], [b]) => a < b ? -1 : 1).map(([sensor, s]) => ({
    sensor,
    readings: s.n,
    min: s.min,
    max: s.max,
    mean: Math.round((s.sum / s.n) * 1000) / 1000,
  }));

  // COPY TO STDOUT as a Web ReadableStream of bytes (`readable()`: a Node Readable), read whole.
  const readable = await sql`
    copy (
      select sensor, count(*) as readings, min(value), max(value), round(avg(value)::numeric, 3) as mean
      from readings group by sensor order by sensor
    ) to stdout with (format csv, header)`.readableStream();
  const csv = await new Response(readable).text();

  return { loaded: loaded as number, batches, largestBatch, sensors, csv };
}

if (import.meta.main) {
  const count = Number(Deno.args[0] ?? 100_000);
  const started = performance.now();
  const summary = await main(Deno.env.get("DATABASE_URL"), count);
  const seconds = ((performance.now() - started) / 1000).toFixed(2);
  console.log(`loaded ${summary.loaded} rows with COPY; read them in ${summary.batches} batches`);
  console.table(summary.sensors);
  console.log(`the server's summary (COPY TO STDOUT):\n${summary.csv}`);
  console.log(`done in ${seconds} s`);
}

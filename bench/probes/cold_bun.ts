// Bun.sql's cold start, run by bun: `bun bench/probes/cold_bun.ts <url>` creates a client, runs
// the first query and prints the ms from creating the client to the answer (as cold.ts does).
import { Bun } from "./bun_api.ts";

const t0 = performance.now();
const sql = new Bun.SQL(Bun.argv[2], { max: 1 });
const [{ x }] = await sql`select 1 as x`;
if (x !== 1) throw new Error(`Bun.sql: wrong answer ${x}`);
const total = performance.now();
await sql.close();
console.log(JSON.stringify({ importToAnswer: total, createdToAnswer: total - t0 }));

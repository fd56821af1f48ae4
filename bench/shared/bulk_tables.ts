// The bulk suite's tables and values, shared by the suite (bench/suites/bulk.ts) and the programs
// it starts (bench/probes/bulk.ts, bench/probes/bulk_codecs.ts): each table's columns, its rows
// as arrays, objects and COPY text, how a load and a read are checked; and one sample value per
// supported type for the per-type view.

const BASE = Date.UTC(2024, 0, 1);
const DAY = 86_400_000;

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
const uuid = (i: number) => `${hex(i, 8)}-${hex(i % 65536, 4)}-4000-8000-${hex(i * 7, 12)}`;
const numeric = (i: number) => `${i}.${String(i % 100).padStart(2, "0")}`;

/** 32 bytes that differ per row. */
function bytes(i: number): Uint8Array {
  const b = new Uint8Array(32);
  for (let k = 0; k < 32; k++) b[k] = (i + k) & 255;
  return b;
}

/** COPY text format: escapes for backslash, tab, newline and carriage return. */
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r" };
const copyText = (s: string) =>
  /[\\\t\n\r]/.test(s) ? s.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]) : s;

/**
 * A bulk table: what the report calls it, its columns (for `create table`), row `i` in every
 * form a method needs (an array in column order, an object keyed by column, a line of COPY text),
 * a select over the loaded table giving `n` (rows), `s` (sum of id) and `m` (the sum of another
 * column that repeats the id), and `mark`, a number read from a row that equals its id (a read
 * decoded the last row whole).
 */
export interface BulkTable {
  name: "events" | "mixed";
  title: string;
  columns: string;
  array(i: number): unknown[];
  object(i: number): Record<string, unknown>;
  text(i: number): string;
  check: string;
  mark(row: Record<string, unknown>): unknown;
}

const EVENTS: BulkTable = {
  name: "events",
  title: "(int8, text, timestamptz, float8, bool, jsonb)",
  columns: "id int8, name text, at timestamptz, score float8, flag bool, meta jsonb",
  array: (i) => [i, `name ${i}`, new Date(BASE + i * 1000), i / 4, i % 2 === 0, { n: i, tag: "x" }],
  object: (i) => ({
    id: i,
    name: `name ${i}`,
    at: new Date(BASE + i * 1000),
    score: i / 4,
    flag: i % 2 === 0,
    meta: { n: i, tag: "x" },
  }),
  text: (i) => {
    const at = new Date(BASE + i * 1000).toISOString();
    const meta = copyText(JSON.stringify({ n: i, tag: "x" }));
    return `${i}\t${copyText(`name ${i}`)}\t${at}\t${i / 4}\t${i % 2 === 0 ? "t" : "f"}\t${meta}\n`;
  },
  check: "select count(*)::int as n, sum(id)::text as s, sum((meta->>'n')::int8)::text as m",
  mark: (row) => (row.meta as { n: number }).n,
};

const MIXED_COLUMNS =
  "id int8, amount numeric, uid uuid, data bytea, tags text[], nums int4[], day date, code varchar(20), note text";

function mixedValues(i: number) {
  return {
    id: i,
    amount: numeric(i),
    uid: uuid(i),
    data: bytes(i),
    tags: ["alpha", `t${i % 10}`, "gamma"],
    nums: [i, i + 1, i + 2],
    day: new Date(BASE + (i % 10_000) * DAY),
    code: `c${i % 1000}`,
    note: i % 10 === 0 ? null : `note ${i}`, // 10% NULLs
  };
}

const MIXED: BulkTable = {
  name: "mixed",
  title:
    "(int8, numeric, uuid, bytea, text[], int4[], date, varchar, text with 10% NULLs), rows as objects",
  columns: MIXED_COLUMNS,
  array: (i) => Object.values(mixedValues(i)),
  object: mixedValues,
  text: (i) => {
    const v = mixedValues(i);
    let data = "";
    for (const b of v.data) data += hex(b, 2);
    const day = v.day.toISOString().slice(0, 10);
    const note = v.note === null ? "\\N" : copyText(v.note);
    return `${i}\t${v.amount}\t${v.uid}\t\\\\x${data}\t{${v.tags}}\t{${v.nums}}\t${day}\t${v.code}\t${note}\n`;
  },
  check: "select count(*)::int as n, sum(id)::text as s, sum(nums[1])::text as m",
  mark: (row) => (row.nums as number[])[0],
};

/** The suite's tables, by name. */
export const BULK_TABLES: Record<BulkTable["name"], BulkTable> = { events: EVENTS, mixed: MIXED };

/**
 * Every type with a binary codec (as SQL and as copyFrom's `types` take it) for the per-type
 * view, with the value of row `i` as an application would have it.
 */
export const CODEC_TYPES: readonly { type: string; value(i: number): unknown }[] = [
  { type: "bool", value: (i) => i % 2 === 0 },
  { type: "int2", value: (i) => i % 30000 },
  { type: "int4", value: (i) => i * 7 },
  { type: "int8", value: (i) => i * 1_000_003 },
  { type: "oid", value: (i) => i + 1 },
  { type: "float4", value: (i) => i / 8 },
  { type: "float8", value: (i) => i / 7 },
  { type: "numeric", value: numeric },
  { type: "text", value: (i) => `name ${i}` },
  { type: "varchar", value: (i) => `c${i % 1000}` },
  { type: "bpchar", value: (i) => `k${i % 100}` },
  { type: "name", value: (i) => `relation_${i}` },
  { type: "bytea", value: bytes },
  { type: "json", value: (i) => ({ n: i, tag: "x" }) },
  { type: "jsonb", value: (i) => ({ n: i, tag: "x" }) },
  { type: "uuid", value: uuid },
  { type: "date", value: (i) => new Date(BASE + (i % 10_000) * DAY) },
  { type: "timestamp", value: (i) => new Date(BASE + i * 1000) },
  { type: "timestamptz", value: (i) => new Date(BASE + i * 1000) },
  { type: "int4[]", value: (i) => [i, i + 1, i + 2] },
  { type: "int8[]", value: (i) => [i, i * 1_000_003] },
  { type: "float8[]", value: (i) => [i / 7, i / 3] },
  { type: "numeric[]", value: (i) => [`${i}.5`, String(i)] },
  { type: "text[]", value: (i) => ["alpha", `t${i % 10}`, "gamma"] },
  { type: "uuid[]", value: (i) => [`${hex(i, 8)}-0000-4000-8000-${hex(i * 7, 12)}`] },
  { type: "timestamptz[]", value: (i) => [new Date(BASE + i * 1000)] },
  { type: "jsonb[]", value: (i) => [{ n: i }] },
];

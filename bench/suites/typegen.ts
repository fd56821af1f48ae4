// Suite: the typed-SQL command end to end. How long `typegen` takes as a user runs it
// (`deno run -A typegen.ts ...`, a process of its own: Deno's start, the TypeScript parser's load,
// scanning, describing, writing), for a project of 100, 250 and 500 queries in 10 files: against the bench server
// (`--database`), and with `--migrations` (PGlite started in the process, the migrations applied).
// Every run starts from the unannotated files, so each writes every annotation. The issue's
// targets for 500 queries: under 5 s against a server, under 10 s with --migrations.
import { fileURLToPath } from "node:url";
import postgres from "../../mod.ts";
import { isQuick, plainBenchUrl } from "../shared/env.ts";
import { run, tempDir } from "../shared/probe.ts";
import { fmt, Report } from "../shared/report.ts";
import { median } from "../shared/stats.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SIZES = [100, 250, 500];
const FILES = 10;
const rounds = isQuick() ? 1 : 5;
/** The command as a user runs it, with this repository's import map. */
const TYPEGEN = ["run", "-A", "--config", `${ROOT}deno.json`, `${ROOT}typegen.ts`];

const MIGRATION = `
create type status as enum ('draft', 'published', 'archived');
create table users (id serial primary key, name text not null, email text, born date,
  score float8, created_at timestamptz not null default now());
create table posts (id serial primary key, author_id int not null references users (id),
  title text not null, body text, status status not null default 'draft', tags text[],
  meta jsonb);
create table comments (id bigserial primary key, post_id int not null references posts (id),
  author_id int references users (id), body text not null, at timestamptz);
`;

/** The shapes of a generated project's queries (SQL of a tagged template), made distinct by `n`. */
const SHAPES: ((n: number) => string)[] = [
  (n) => `select id, name, email from users where id > \${${n}} and name <> ${`'u${n}'`}`,
  (n) =>
    `select p.id, p.title, u.name as author, p.status from posts p
        left join users u on u.id = p.author_id where p.id = \${${n}} limit ${n}`,
  (n) =>
    `insert into comments (post_id, author_id, body) values (\${${n}}, \${null}, \${"c${n}"})
        returning id, at`,
  (n) => `select count(*) as n${n}, max(score) as best from users where born < \${new Date()}`,
  (n) => `update posts set title = \${"t${n}"} where id = \${${n}} returning id, tags, meta`,
];
/** The n-th query of a generated project. */
const query = (n: number) => `sql\`${SHAPES[n % SHAPES.length](n)}\``;

/** Writes a project of `count` queries into `dir`: `FILES` source files and one migration. */
async function project(dir: string, count: number): Promise<void> {
  await Deno.mkdir(`${dir}/migrations`, { recursive: true });
  await Deno.mkdir(`${dir}/src`, { recursive: true });
  await Deno.writeTextFile(`${dir}/migrations/0000_init.sql`, MIGRATION);
  for (let f = 0; f < FILES; f++) {
    const lines = ['import postgres from "jsr:@pgpipe/pgpipe";', "const sql = postgres();"];
    for (let n = f; n < count; n += FILES) lines.push(`export const q${n} = () => ${query(n)};`);
    await Deno.writeTextFile(`${dir}/src/queries_${f}.ts`, lines.join("\n") + "\n");
  }
}

/** One timed typegen process over a fresh copy of the project; its wall time in ms. */
async function timed(count: number, schema: string[]): Promise<number> {
  await using dir = await tempDir("typegen_bench_");
  await project(dir.path, count);
  const t0 = performance.now();
  const out = await run(Deno.execPath(), [...TYPEGEN, ...schema, "src/"], { cwd: dir.path });
  const ms = performance.now() - t0;
  if (!out.includes(`${count} queries in ${FILES} files; ${FILES} files written`)) {
    throw new Error(`typegen on ${count} queries wrote not every file:\n${out}`);
  }
  return ms;
}

// The server's schema: the same migration, in a schema of its own, dropped at the end.
const base = plainBenchUrl();
const schemaName = `typegen_bench_${Date.now()}`;
const server = `${base}${base.includes("?") ? "&" : "?"}search_path=${schemaName}`;

/** Runs `text` on the bench server (the schema's creation and its drop). */
async function onServer(text: string): Promise<void> {
  await using sql = postgres(base, { onnotice: () => {} });
  await sql.unsafe(text);
}

await onServer(`create schema ${schemaName}; set search_path = ${schemaName}; ${MIGRATION}`);

const sources = [
  { label: "--database (bench server)", args: ["--database", server], target: 5000 },
  { label: "--migrations (PGlite)", args: ["--migrations", "migrations"], target: 10000 },
];
const report = new Report("typegen");
const rows: string[][] = [];
try {
  for (const source of sources) {
    for (const count of SIZES) {
      await timed(count, source.args); // warm Deno's caches
      const times: number[] = [];
      for (let i = 0; i < rounds; i++) times.push(await timed(count, source.args));
      const ms = median(times);
      report.measure(`${count} queries, ${source.label}`, "wall time", ms, "ms");
      const target = count === 500 ? fmt(source.target) : "";
      rows.push([source.label, String(count), fmt(ms), fmt(ms / count, 2), target]);
    }
  }
} finally {
  await onServer(`drop schema ${schemaName} cascade`);
}
report.table(
  `typegen, one process per run (deno run -A typegen.ts), ${FILES} files, every annotation ` +
    `written (median ms of ${rounds} runs)`,
  "schema | queries | ms | ms per query | target ms",
  rows,
);
report.note(
  "A run is the whole command: Deno's start, the TypeScript parser, scanning, describing (one " +
    "pipelined batch), writing; with --migrations also PGlite's start and the migration.",
  "The slope between sizes is the per-query cost; what a 100-query run takes is mostly fixed.",
);
await report.emit();

/**
 * A JSON API over one table, served by `Deno.serve`, with one module-level `sql` client shared
 * by every request.
 *
 * ```sh
 * deno run --allow-net --allow-env --allow-read examples/http_users.ts   # no server: PGlite
 * DATABASE_URL=postgres://app:secret@localhost:5432/app \
 *   deno run --allow-net --allow-env examples/http_users.ts
 *
 * curl -X POST localhost:8000/users -d '{"name": "Ada", "email": "ada@example.com"}'
 * curl -X POST localhost:8000/users -d '[{"name": "Alan", "email": "alan@example.com"}]'
 * curl localhost:8000/users?limit=10
 * curl -X PATCH localhost:8000/users/1 -d '{"name": "Ada Lovelace"}'
 * curl localhost:8000/stats
 * curl -X DELETE localhost:8000/users/1
 * ```
 *
 * | route               | does                                                                |
 * | ------------------- | ------------------------------------------------------------------- |
 * | `GET /users`        | lists users by id; `?limit=` (default 50, at most 500), `?after=id` |
 * | `POST /users`       | inserts one user (an object) or several (an array); 201 with them   |
 * | `GET /users/:id`    | one user, or 404 (400 when `:id` is not an integer)                 |
 * | `PATCH /users/:id`  | changes `name` and/or `email`; 200 with the row, or 404             |
 * | `DELETE /users/:id` | 204, or 404                                                         |
 * | `GET /stats`        | the user count and the latest sign-up, from two pipelined queries   |
 *
 * Without `DATABASE_URL` it runs on PGlite, a PostgreSQL inside this process, in memory (PGlite
 * reads its own files: `--allow-read`). `PORT` sets the port (default 8000). Ctrl-C stops taking
 * requests, lets running ones finish and closes the database connections.
 *
 * @module
 */

// In your project: import postgres, { PostgresError } from "jsr:@pgpipe/pgpipe";
import postgres, { PostgresError } from "../mod.ts";
// In your project: import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
import { pglite } from "../pglite.ts";

const url = Deno.env.get("DATABASE_URL");
if (url === undefined) console.log("DATABASE_URL is not set: running on PGlite, in memory");

/**
 * One client for the whole process. Creating it connects nothing: connections open with the
 * first queries, up to `max`, and the queries of concurrent requests are pipelined on them.
 * On PGlite there is one connection, which pipelines them all.
 */
export const sql = url === undefined
  ? postgres(pglite())
  : postgres(url, { max: 4, idle_timeout: 60 });

/** A row of the `users` table. */
export interface User {
  id: number;
  name: string;
  email: string;
  created_at: Date;
}

/** Creates the table if it is missing (a real application would run migrations instead). */
export async function migrate(): Promise<void> {
  await sql`
    create table if not exists users (
      id int generated always as identity primary key,
      name text not null check (name <> ''),
      email text not null unique check (email like '%_@_%'),
      created_at timestamptz not null default now()
    )`;
}

/** A request the API refuses, with the status to answer. */
class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function json(body: unknown, status = 200): Response {
  return Response.json(body, { status });
}

/** The columns a client may write, checked so that nothing else reaches the SQL. */
type UserInput = Pick<User, "name" | "email">;

function userInput(value: unknown, partial: boolean): Partial<UserInput> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HttpError(400, "a user is a JSON object");
  }
  const out: Partial<UserInput> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key !== "name" && key !== "email") throw new HttpError(400, `unknown field ${key}`);
    if (typeof v !== "string") throw new HttpError(400, `${key} must be a string`);
    out[key] = v;
  }
  if (!partial && (out.name === undefined || out.email === undefined)) {
    throw new HttpError(400, "name and email are required");
  }
  if (partial && Object.keys(out).length === 0) throw new HttpError(400, "nothing to change");
  return out;
}

async function body(req: Request): Promise<unknown> {
  try {
    return await req.json();
  } catch {
    throw new HttpError(400, "the body is not valid JSON");
  }
}

function intParam(text: string | null, fallback: number, max: number): number {
  if (text === null) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > max) {
    throw new HttpError(400, `expected an integer from 0 to ${max}, got ${text}`);
  }
  return n;
}

async function listUsers(params: URLSearchParams): Promise<User[]> {
  const limit = intParam(params.get("limit"), 50, 500);
  const after = intParam(params.get("after"), 0, 2 ** 31 - 1);
  return await sql<User[]>`
    select id, name, email, created_at from users
    where id > ${after}
    order by id
    limit ${limit}`;
}

/** Inserts one user (an object) or several (an array) in one statement. */
async function createUsers(input: unknown): Promise<User | User[]> {
  const rows = (Array.isArray(input) ? input : [input]).map((u) => userInput(u, false));
  if (rows.length === 0) throw new HttpError(400, "no users given");
  // sql(rows, ...columns) expands to ("name","email") values ($1,$2),($3,$4),...
  const users = await sql<User[]>`
    insert into users ${sql(rows, "name", "email")}
    returning id, name, email, created_at`;
  return Array.isArray(input) ? [...users] : users[0];
}

async function updateUser(id: number, input: unknown): Promise<User | undefined> {
  const changes = userInput(input, true);
  // sql(object) after `set` expands to "name" = $1, "email" = $2 for the keys present.
  const [user] = await sql<User[]>`
    update users set ${sql(changes)}
    where id = ${id}
    returning id, name, email, created_at`;
  return user;
}

async function stats(): Promise<{ users: number; latest: Date | null }> {
  // Issued together, the two queries leave in one write and come back in one round trip.
  const [[count], [latest]] = await Promise.all([
    sql`select count(*)::int as users from users`,
    sql`select max(created_at) as latest from users`,
  ]);
  return { users: count.users as number, latest: latest.latest as Date | null };
}

/** Answers one request. Every query goes through the module-level `sql`. */
export async function handler(req: Request): Promise<Response> {
  const url = new URL(req.url);
  try {
    if (url.pathname === "/users") {
      if (req.method === "GET") return json(await listUsers(url.searchParams));
      if (req.method === "POST") return json(await createUsers(await body(req)), 201);
      throw new HttpError(405, `${req.method} is not allowed on /users`);
    }
    const match = /^\/users\/([^/]+)$/.exec(url.pathname);
    if (match) {
      // Checked before it reaches SQL: /users/abc is the client's mistake (400), not ours (500).
      const id = intParam(match[1], 0, 2 ** 31 - 1);
      let user: User | undefined;
      if (req.method === "GET") {
        [user] = await sql<User[]>`
          select id, name, email, created_at from users where id = ${id}`;
      } else if (req.method === "PATCH") {
        user = await updateUser(id, await body(req));
      } else if (req.method === "DELETE") {
        const { count } = await sql`delete from users where id = ${id}`;
        if (count === 1) return new Response(null, { status: 204 });
      } else {
        throw new HttpError(405, `${req.method} is not allowed on /users/:id`);
      }
      return user ? json(user) : json({ error: `no user ${id}` }, 404);
    }
    if (url.pathname === "/stats" && req.method === "GET") return json(await stats());
    return json({ error: "not found" }, 404);
  } catch (e) {
    if (e instanceof HttpError) return json({ error: e.message }, e.status);
    if (e instanceof PostgresError) {
      // SQLSTATE codes: 23505 unique_violation, 23514 check_violation.
      if (e.code === "23505") return json({ error: "this email is already registered" }, 409);
      if (e.code === "23514") return json({ error: "invalid name or email" }, 400);
    }
    console.error(e);
    return json({ error: "internal error" }, 500);
  }
}

/** Starts serving `handler` (port 8000 unless given). */
export function start(options: Deno.ServeTcpOptions = {}): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({ port: 8000, ...options }, handler);
}

if (import.meta.main) {
  await migrate();
  const server = start({ port: Number(Deno.env.get("PORT") ?? 8000) });
  Deno.addSignalListener("SIGINT", async () => {
    await server.shutdown(); // stop accepting; wait for the requests being served
    await sql.end({ timeout: 5 }); // then close the connections (destroyed after 5 s)
    Deno.exit(0);
  });
}

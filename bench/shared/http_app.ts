// The HTTP suite's application: one request handler, the very same code for every driver (it
// only needs a postgres.js-style `sql` tag, which pgpipe, postgres.js and Bun.sql all provide)
// and for both runtimes (it uses only web-standard Request/Response, so Deno and Bun load it
// alike). Each request reads a page of 100 users, builds an object per row and answers JSON.

/** The table the suite seeds and the handler reads, its rows, and the rows per request. */
export const USERS_TABLE = "bench_http_users";
export const USERS = 10_000;
export const PAGE = 100;

/** The slice of the drivers' API the handler uses: a tagged template resolving to row objects. */
export type SqlTag = (
  strings: TemplateStringsArray,
  ...values: unknown[]
) => PromiseLike<readonly Record<string, any>[]>;

/** Creates and fills the table (text, timestamptz, bool, numeric and jsonb columns). */
export const SEED_SQL = [
  `drop table if exists ${USERS_TABLE}`,
  `create table ${USERS_TABLE} (id int primary key, name text not null, email text not null,
    created_at timestamptz not null, active boolean not null, score numeric(10, 2) not null,
    data jsonb not null)`,
  `insert into ${USERS_TABLE}
    select i, 'User ' || i, 'user' || i || '@example.com',
      timestamptz '2024-01-01 00:00:00+00' + i * interval '7 minutes 13 seconds',
      i % 3 <> 0, (i * 7919 % 100000) / 100.0,
      jsonb_build_object('plan', (array['free', 'pro', 'team'])[i % 3 + 1], 'logins', i % 97,
        'tags', jsonb_build_array('t' || i % 5, 't' || i % 7))
    from generate_series(1, ${USERS}) i`,
  `analyze ${USERS_TABLE}`,
];

/**
 * The page after id 0 as PostgreSQL itself builds it in JSON: what every server must answer first
 * (`score` a number, or `score::text` as Drizzle gives numeric).
 */
export async function expectedPage(
  sql: { unsafe(query: string): PromiseLike<readonly Record<string, any>[]> },
  score: "score" | "score::text",
): Promise<unknown> {
  const [{ page }] = await sql.unsafe(`
    select json_agg(json_build_object(
      'id', id, 'name', name, 'email', email,
      'createdAt', to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'active', active, 'score', ${score}, 'data', data) order by id)::text as page
    from (select * from ${USERS_TABLE} where id > 0 order by id limit ${PAGE}) t`);
  return JSON.parse(page as string);
}

/** A row as the API answers it: created_at an ISO string, score (a string from drivers) a number. */
const userJson = (row: Record<string, any>) => ({
  id: row.id as number,
  name: row.name as string,
  email: row.email as string,
  createdAt: (row.created_at as Date).toISOString(),
  active: row.active as boolean,
  score: Number(row.score),
  data: row.data as unknown,
});

/**
 * A handler over `fetchPage`: `GET /users` answers the next page of PAGE users (pages cycle
 * through the table), `GET /users?after=N` the page after id N (the suite's correctness check).
 */
export function pagedHandler(
  fetchPage: (after: number) => Promise<unknown[]>,
): (req: Request) => Promise<Response> {
  let page = 0;
  return async (req) => {
    const url = new URL(req.url);
    if (url.pathname !== "/users") return new Response("not found", { status: 404 });
    const given = url.searchParams.get("after");
    const after = given === null ? (page++ * PAGE) % USERS : Number(given);
    try {
      return Response.json(await fetchPage(after));
    } catch (e) {
      return new Response(String(e), { status: 500 });
    }
  };
}

/** The handler over the driver's own API (USERS_TABLE and PAGE written out: a constant text). */
export const makeHandler = (sql: SqlTag): (req: Request) => Promise<Response> =>
  pagedHandler(async (after) =>
    (await sql`
      select id, name, email, created_at, active, score, data from bench_http_users
      where id > ${after} order by id limit 100`).map(userJson)
  );

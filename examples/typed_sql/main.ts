/**
 * Typed SQL: every query's row and parameter types were written by typegen from the migrations
 * in `migrations/`, so `deno check` knows each row's columns and refuses a value of the wrong
 * type.
 *
 * ```sh
 * deno run -A examples/typed_sql/main.ts       # runs on PGlite, the migrations applied first
 *
 * # after changing a migration or a query: write the types again (or check them, in CI)
 * deno run -A jsr:@pgpipe/pgpipe/typegen --migrations examples/typed_sql/migrations examples/typed_sql/
 * deno run -A jsr:@pgpipe/pgpipe/typegen --migrations examples/typed_sql/migrations --check examples/typed_sql/
 * ```
 *
 * @module
 */
// In your project: import postgres, { type Sql } from "jsr:@pgpipe/pgpipe";
import postgres, { type Sql } from "../../mod.ts";
// In your project: import { pglite } from "jsr:@pgpipe/pgpipe/pglite";
import { pglite } from "../../pglite.ts";

/** Applies the migrations, in name order (what typegen's --migrations does too). */
export async function migrate(sql: Sql): Promise<void> {
  const folder = new URL("./migrations/", import.meta.url);
  const names = [...Deno.readDirSync(folder)].map((e) => e.name).filter((n) => n.endsWith(".sql"));
  for (const name of names.sort()) {
    // A migration is several statements of text from a file: typegen leaves it alone.
    await sql.unsafe(await Deno.readTextFile(new URL(name, folder)));
  }
}

/** Adds a user; the email may be missing. */
export async function addUser(sql: Sql, name: string, email: string | null) {
  const [user] = await sql<
    { id: number; name: string; role: "admin" | "member"; created_at: Date }[],
    [string, string | null]
  >`
    insert into users (name, email) values (${name}, ${email})
    returning id, name, role, created_at
  `;
  return user;
}

/** Publishes a post and says how many its author has, in one transaction. */
export function publish(sql: Sql, authorId: number, title: string, tags: string[]) {
  return sql.begin(async (tx) => {
    const [post] = await tx<{ id: number }[], [number, string, readonly (string | null)[]]>`
      insert into posts (author_id, title, tags, published_at)
      values (${authorId}, ${title}, ${tags}, now())
      returning id
    `;
    const [{ posts }] = await tx<
      { posts: string }[],
      [number | null]
    >`select count(*) as posts from posts where author_id = ${authorId}`;
    return { id: post.id, posts };
  });
}

/** Every user with their posts' titles: a user without posts has a null title. */
export function usersAndPosts(sql: Sql) {
  return sql<
    {
      name: string;
      role: "admin" | "member";
      title: string | null;
      tags: (string | null)[] | null;
    }[]
  >`
    select u.name, u.role, p.title, p.tags
    from users u
    left join posts p on p.author_id = u.id
    order by u.id, p.id
  `;
}

if (import.meta.main) {
  const sql = postgres(pglite());
  await migrate(sql);
  const ada = await addUser(sql, "Ada", "ada@example.com");
  await addUser(sql, "Grace", null);
  const post = await publish(sql, ada.id, "Notes on the engine", ["math", "engines"]);
  console.log(`${ada.name} (${ada.role}) published post ${post.id}; posts: ${post.posts}`);
  for (const row of await usersAndPosts(sql)) {
    console.log(`${row.name}: ${row.title ?? "(no posts)"} ${row.tags?.join(", ") ?? ""}`);
  }
  await sql.end();
}

// deno-lint-ignore-file no-import-prefix -- the ORMs are bench-only npm imports, pinned here
// The orm and orm_http suites' application: its tables, as Drizzle's schema and as Kysely's
// database type, the seed, and the Drizzle HTTP handler. The users are the HTTP suite's table
// (http_app.ts: int, text, timestamptz, bool, numeric and jsonb columns); each of the first
// AUTHORS users has POSTS posts with COMMENTS comments each, for the relational query; the
// inserts go to a table of their own, each batch under its own number so it can be counted.
import { gt, relations } from "npm:drizzle-orm@0.45.4";
// drizzle-orm/postgres-js imports postgres.js when it loads (for `drizzle(url)`), so it must be
// in the module graph beside Drizzle, as the README tells applications; it never connects here.
import "npm:postgres@3.4.9";
import { drizzle, type PostgresJsDatabase } from "npm:drizzle-orm@0.45.4/postgres-js";
import { boolean, integer, jsonb, numeric } from "npm:drizzle-orm@0.45.4/pg-core";
import { pgTable, serial, text, timestamp } from "npm:drizzle-orm@0.45.4/pg-core";
import { PAGE, pagedHandler, SEED_SQL as USERS_SEED, USERS, USERS_TABLE } from "./http_app.ts";

export { PAGE, USERS, USERS_TABLE };

/** Users with posts, posts per author, comments per post. */
export const AUTHORS = 1_000;
export const POSTS = 3;
export const COMMENTS = 3;

export const users = pgTable(USERS_TABLE, {
  id: integer("id").primaryKey(),
  name: text("name").notNull(),
  email: text("email").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull(),
  active: boolean("active").notNull(),
  score: numeric("score", { precision: 10, scale: 2 }).notNull(),
  data: jsonb("data").notNull(),
});

export const posts = pgTable("bench_orm_posts", {
  id: integer("id").primaryKey(),
  authorId: integer("author_id").notNull(),
  title: text("title").notNull(),
  publishedAt: timestamp("published_at", { withTimezone: true }).notNull(),
  views: integer("views").notNull(),
});

export const comments = pgTable("bench_orm_comments", {
  id: integer("id").primaryKey(),
  postId: integer("post_id").notNull(),
  body: text("body").notNull(),
  likes: integer("likes").notNull(),
});

export const inserts = pgTable("bench_orm_inserts", {
  id: serial("id").primaryKey(),
  batch: integer("batch").notNull(),
  name: text("name").notNull(),
  active: boolean("active").notNull(),
  createdAt: timestamp("created_at", { withTimezone: true }).notNull(),
  data: jsonb("data").notNull(),
});

export const usersRelations = relations(users, ({ many }) => ({ posts: many(posts) }));
export const postsRelations = relations(posts, ({ one, many }) => ({
  author: one(users, { fields: [posts.authorId], references: [users.id] }),
  comments: many(comments),
}));
export const commentsRelations = relations(comments, ({ one }) => ({
  post: one(posts, { fields: [comments.postId], references: [posts.id] }),
}));

/** The schema handed to drizzle(), relations included (for `db.query`). */
export const schema = {
  users,
  posts,
  comments,
  inserts,
  usersRelations,
  postsRelations,
  commentsRelations,
};
export type Db = PostgresJsDatabase<typeof schema>;

/** The same tables for Kysely (columns by their SQL names). */
export interface KyselyDb {
  bench_http_users: {
    id: number;
    name: string;
    email: string;
    created_at: Date;
    active: boolean;
    score: string;
    data: unknown;
  };
  bench_orm_inserts: {
    id: number | undefined;
    batch: number;
    name: string;
    active: boolean;
    created_at: Date;
    data: unknown;
  };
}

const TABLES = ["bench_orm_comments", "bench_orm_posts", "bench_orm_inserts"];

/** Creates and fills the tables (the users first: the HTTP suite's seed). */
export const SEED_SQL = [
  ...TABLES.map((t) => `drop table if exists ${t}`),
  ...USERS_SEED,
  `create table bench_orm_posts (id int primary key, author_id int not null
    references ${USERS_TABLE}, title text not null, published_at timestamptz not null,
    views int not null)`,
  `insert into bench_orm_posts select i, (i - 1) / ${POSTS} + 1, 'Post ' || i,
    timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour', i % 1000
    from generate_series(1, ${AUTHORS * POSTS}) i`,
  `create index on bench_orm_posts (author_id)`,
  `create table bench_orm_comments (id int primary key, post_id int not null
    references bench_orm_posts, body text not null, likes int not null)`,
  `insert into bench_orm_comments select i, (i - 1) / ${COMMENTS} + 1, 'Comment ' || i, i % 17
    from generate_series(1, ${AUTHORS * POSTS * COMMENTS}) i`,
  `create index on bench_orm_comments (post_id)`,
  `create table bench_orm_inserts (id serial primary key, batch int not null, name text not null,
    active boolean not null, created_at timestamptz not null, data jsonb not null)`,
  `create index on bench_orm_inserts (batch)`,
  `analyze`,
];

/** Drops what SEED_SQL made. */
export const DROP_SQL = [...TABLES, USERS_TABLE].map((t) => `drop table if exists ${t}`);

/**
 * The orm_http suite's handler: pages of PAGE users as Drizzle (drizzle-orm/postgres-js over
 * `sql`, pgpipe or postgres.js) returns them (see pagedHandler).
 */
export function drizzleHandler(sql: unknown): (req: Request) => Promise<Response> {
  const db = drizzle(sql as any, { schema });
  return pagedHandler((after) =>
    db.select().from(users).where(gt(users.id, after)).orderBy(users.id).limit(PAGE)
  );
}

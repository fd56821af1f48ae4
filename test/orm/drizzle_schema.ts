// deno-lint-ignore-file no-import-prefix -- npm packages are test-only imports, pinned here
// The Drizzle schema of test/orm_drizzle_test.ts: tables with every column type and mode
// drizzle-orm/pg-core 0.45 has (bar the extension types: pgvector's and PostGIS's), an enum,
// a view, a materialized view and the relations of the relational query API. The migrations in
// test/fixtures/drizzle/ create exactly these tables.
import { relations, sql } from "npm:drizzle-orm@0.45.4";
import {
  bigint,
  bigserial,
  bit,
  boolean,
  char,
  check,
  cidr,
  customType,
  date,
  doublePrecision,
  index,
  inet,
  integer,
  interval,
  json,
  jsonb,
  line,
  macaddr,
  macaddr8,
  numeric,
  pgSchema,
  point,
  real,
  serial,
  smallint,
  smallserial,
  text,
  time,
  timestamp,
  uuid,
  varchar,
} from "npm:drizzle-orm@0.45.4/pg-core";
import type { Buffer } from "node:buffer";

/** Every object lives in this schema, dropped before each run. */
export const SCHEMA = "orm_drizzle";
export const schema = pgSchema(SCHEMA);

export const mood = schema.enum("mood", ["sad", "ok", "happy"]);

/** bytea has no pg-core column: the customType Drizzle's docs show. */
export const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => "bytea",
});

/** A custom type that maps both ways: cents in the program, numeric(10, 2) in the database. */
export const money = customType<{ data: number; driverData: string }>({
  dataType: () => "numeric(10, 2)",
  toDriver: (cents) => (cents / 100).toFixed(2),
  fromDriver: (text) => Math.round(Number(text) * 100),
});

export const users = schema.table("users", {
  id: serial("id").primaryKey(),
  name: text("name").notNull(),
  email: varchar("email", { length: 255 }).notNull().unique(),
  age: integer("age"),
  active: boolean("active").notNull().default(true),
  mood: mood("mood").default("ok"),
  createdAt: timestamp("created_at", { withTimezone: true, precision: 6 }).notNull().defaultNow(),
  seenAt: timestamp("seen_at", { withTimezone: true, precision: 6, mode: "string" }),
  born: date("born", { mode: "date" }),
  bornText: date("born_text"),
  meta: jsonb("meta").$type<{ tags?: string[]; level?: number } | string | number[]>(),
  settings: json("settings").$type<Record<string, unknown>>(),
  tags: text("tags").array().notNull().default(sql`'{}'::text[]`),
  score: numeric("score", { precision: 12, scale: 4 }),
  visits: bigint("visits", { mode: "number" }),
  balance: bigint("balance", { mode: "bigint" }),
  uid: uuid("uid").defaultRandom(),
  nickname: text("nickname"),
}, (t) => [index("users_age_idx").on(t.age)]);

export const posts = schema.table("posts", {
  id: serial("id").primaryKey(),
  authorId: integer("author_id").notNull().references(() => users.id, { onDelete: "cascade" }),
  title: text("title").notNull(),
  body: text("body"),
  publishedAt: timestamp("published_at", { precision: 6, mode: "string" }),
  views: integer("views").notNull().default(0),
}, (t) => [check("views_positive", sql`${t.views} >= 0`)]);

export const comments = schema.table("comments", {
  id: serial("id").primaryKey(),
  postId: integer("post_id").notNull().references(() => posts.id, { onDelete: "cascade" }),
  authorId: integer("author_id").notNull().references(() => users.id),
  text: text("text").notNull(),
  createdAt: timestamp("created_at", { precision: 3 }).notNull(),
});

/** One column of each type and mode. */
export const everything = schema.table("everything", {
  id: integer("id").primaryKey().generatedAlwaysAsIdentity(),
  small: smallint("small"),
  int: integer("int"),
  big53: bigint("big53", { mode: "number" }),
  big64: bigint("big64", { mode: "bigint" }),
  smallSerial: smallserial("small_serial"),
  bigSerial53: bigserial("big_serial53", { mode: "number" }),
  bigSerial64: bigserial("big_serial64", { mode: "bigint" }),
  real: real("real"),
  double: doublePrecision("double"),
  numeric: numeric("numeric"),
  numericNumber: numeric("numeric_number", { mode: "number" }),
  numericBigint: numeric("numeric_bigint", { mode: "bigint" }),
  bool: boolean("bool"),
  text: text("text"),
  textEnum: text("text_enum", { enum: ["a", "b"] }),
  varchar: varchar("varchar", { length: 20 }),
  char: char("char", { length: 5 }),
  json: json("json"),
  jsonb: jsonb("jsonb"),
  uuid: uuid("uuid"),
  date: date("date", { mode: "date" }),
  dateString: date("date_string", { mode: "string" }),
  time: time("time", { precision: 6 }),
  timeTz: time("time_tz", { withTimezone: true }),
  timestamp: timestamp("timestamp", { precision: 3 }),
  timestampString: timestamp("timestamp_string", { precision: 6, mode: "string" }),
  timestampTz: timestamp("timestamp_tz", { withTimezone: true }),
  timestampTzString: timestamp("timestamp_tz_string", {
    withTimezone: true,
    precision: 6,
    mode: "string",
  }),
  interval: interval("interval"),
  intervalDay: interval("interval_day", { fields: "day to second", precision: 3 }),
  point: point("point"),
  pointXy: point("point_xy", { mode: "xy" }),
  line: line("line"),
  lineAbc: line("line_abc", { mode: "abc" }),
  inet: inet("inet"),
  cidr: cidr("cidr"),
  macaddr: macaddr("macaddr"),
  macaddr8: macaddr8("macaddr8"),
  bit: bit("bit", { dimensions: 4 }),
  bytes: bytea("bytes"),
  price: money("price"),
  mood: mood("mood"),
  moods: mood("moods").array(),
  texts: text("texts").array(),
  ints: integer("ints").array(),
  matrix: integer("matrix").array().array(),
  bools: boolean("bools").array(),
  numerics: numeric("numerics").array(),
  dates: date("dates", { mode: "date" }).array(),
  dateStrings: date("date_strings").array(),
  timestamps: timestamp("timestamps", { mode: "date", precision: 3 }).array(),
  timestampTzStrings: timestamp("timestamp_tz_strings", {
    withTimezone: true,
    precision: 6,
    mode: "string",
  }).array(),
  uuids: uuid("uuids").array(),
  jsonbs: jsonb("jsonbs").array(),
});

export const activeUsers = schema.view("active_users").as((qb) =>
  qb.select({ id: users.id, name: users.name, createdAt: users.createdAt }).from(users).where(
    sql`${users.active}`,
  )
);

export const postCounts = schema.materializedView("post_counts", {
  authorId: integer("author_id").notNull(),
  posts: bigint("posts", { mode: "number" }).notNull(),
  lastPublished: timestamp("last_published", { precision: 6, mode: "string" }),
}).existing();

export const usersRelations = relations(users, ({ many }) => ({
  posts: many(posts),
  comments: many(comments),
}));

export const postsRelations = relations(posts, ({ one, many }) => ({
  author: one(users, { fields: [posts.authorId], references: [users.id] }),
  comments: many(comments),
}));

export const commentsRelations = relations(comments, ({ one }) => ({
  post: one(posts, { fields: [comments.postId], references: [posts.id] }),
  author: one(users, { fields: [comments.authorId], references: [users.id] }),
}));

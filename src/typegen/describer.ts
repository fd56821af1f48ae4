/**
 * The describer of the typed-SQL command: it asks PostgreSQL (a server, or an in-process PGlite
 * with the project's migrations applied) what each query's parameters and rows are, without ever
 * running one. Each text is sent as Parse + Describe (pgpipe's `query.describe()`), all of them at
 * once on one connection, so they are pipelined. The session logs each statement's parse tree to
 * the client (`debug_print_parse`, `client_min_messages = log`), and nullability.ts proves from
 * that tree which columns are never null; the catalog gives `NOT NULL` constraints, enums' labels,
 * domains' bases and arrays' elements, and type_map.ts turns the OIDs into TypeScript.
 */
import { createSql, type Sql } from "../client/client.ts";
import type { Options } from "../config/options.ts";
import { env } from "../config/environment.ts";
import { PostgresError } from "../errors.ts";
import type { Notice } from "../errors.ts";
import type { DescribedStatement } from "../query/query.ts";
import { toCamel, toKebab, toPascal } from "../query/transform.ts";
import { pglite } from "../../pglite.ts";
import type { ColumnType, Describer, QueryTypes, SchemaSource, TypegenOptions } from "./model.ts";
import {
  lineOfPosition,
  MigrationError,
  type MigrationStatement,
  readMigrations,
} from "./migrations.ts";
import { contribExtensionsOf, loadContribExtensions } from "./pglite_extensions.ts";
import { NodeTreeError, parseNodeTree, type PgNode } from "./node_tree.ts";
import { nonNullColumns, relationsOf, requiredParams, returnedNames } from "./nullability.ts";
import {
  type CatalogType,
  paramType,
  resultType,
  type TypeCatalog,
  typesToLookUp,
} from "./type_map.ts";

export { MigrationError } from "./migrations.ts";
export type { ColumnType, Describer, QueryTypes, SchemaSource, TypegenOptions } from "./model.ts";

/**
 * The session settings: the server sends each statement's parse tree to the client; the session
 * cannot write even by mistake; a describe waiting for a lock another session holds (a running
 * migration) fails alone after a while instead of holding the run up.
 */
const SESSION_SETUP = "set client_min_messages = log; set debug_print_parse = on; " +
  "set debug_pretty_print = off; set default_transaction_read_only = on; " +
  "set lock_timeout = '10s'";

/**
 * The parse trees are LOG messages, which a server also writes to its own log by default: a
 * role allowed to (a superuser, or one granted SET on it) keeps them out of it. Others cannot,
 * and their server's log gets a line per statement described.
 */
const QUIET_SERVER_LOG = "set log_min_messages = panic";

/** The message of the log line `debug_print_parse` writes; its detail is the tree. */
const PARSE_TREE_MESSAGE = "parse tree:";

/**
 * The NOT NULL columns of the given tables: ordinary and partitioned ones (a foreign table's
 * constraint is not enforced, a view's columns have none), and not by a NOT VALID constraint of
 * PostgreSQL 18 (rows from before it may hold nulls).
 */
const NOT_NULL_QUERY = `
  select a.attrelid::int8 as rel, a.attnum::int4 as num
  from pg_catalog.pg_attribute a join pg_catalog.pg_class r on r.oid = a.attrelid
  where a.attrelid = any($1::oid[]) and r.relkind in ('r', 'p') and a.attnum > 0
    and a.attnotnull and not a.attisdropped
    and not exists (
      select 1 from pg_catalog.pg_constraint c
      where c.conrelid = a.attrelid and c.contype = 'n' and not c.convalidated
        and a.attnum = any(c.conkey))`;

/** The tables with rules (an INSTEAD rule makes what a statement writing to one returns). */
const RULE_QUERY = `
  select c.oid::int8 as rel from pg_catalog.pg_class c
  where c.oid = any($1::oid[]) and c.relhasrules and c.relkind in ('r', 'p')`;

/**
 * The tables with a BEFORE ROW trigger on insert or update (tgtype bits: 1 row, 2 before, 4
 * insert, 16 update): it may fill a column the statement leaves null, so there a null parameter
 * for a NOT NULL column is not refused.
 */
const TRIGGER_QUERY = `
  select distinct t.tgrelid::int8 as rel from pg_catalog.pg_trigger t
  where t.tgrelid = any($1::oid[]) and not t.tgisinternal and (t.tgtype & 3) = 3
    and (t.tgtype & 20) <> 0`;

/**
 * The definitions of the plain views among the relations, to describe like a query: a view's
 * column is non-null when its definition's is. A materialized view is left out: its rows are
 * from its last refresh, and the tables' constraints may have changed since.
 */
const VIEW_QUERY = `
  select c.oid::int8 as rel, pg_catalog.pg_get_viewdef(c.oid) as definition
  from pg_catalog.pg_class c
  where c.oid = any($1::oid[]) and c.relkind = 'v'`;

/** What type_map.ts needs of each user-defined type. */
const TYPE_QUERY = `
  select t.oid::int8 as oid, t.typtype::text as kind, t.typbasetype::int8 as base,
    (case when t.typcategory = 'A' then t.typelem else 0 end)::int8 as element,
    coalesce((select array_agg(e.enumlabel::text order by e.enumsortorder)
      from pg_catalog.pg_enum e where e.enumtypid = t.oid), '{}') as labels
  from pg_catalog.pg_type t
  where t.oid = any($1::oid[])`;

/** A describe's outcome before types are mapped. */
type Outcome =
  | { ok: true; statement: DescribedStatement; tree: PgNode | null }
  | { ok: false; types: QueryTypes };

/** The row key each column name becomes under the client's `transform`. */
function columnName(options: TypegenOptions): (name: string) => string {
  switch (options.transform) {
    case "camel":
      return toCamel;
    case "pascal":
      return toPascal;
    case "kebab":
      return toKebab;
    default:
      return (name) => name;
  }
}

/** A describe's failure as the model reports it. */
function failure(e: unknown): QueryTypes {
  if (e instanceof PostgresError) {
    const position = e.position === undefined ? undefined : Number(e.position);
    return {
      ok: false,
      message: e.message,
      ...(position !== undefined && position >= 1 ? { position } : {}),
      code: e.code,
    };
  }
  return { ok: false, message: e instanceof Error ? e.message : String(e) };
}

/** Reads a logged parse tree; null when it cannot be read (then nothing is proved non-null). */
function readTree(detail: string | undefined): PgNode | null {
  if (detail === undefined) return null;
  try {
    return parseNodeTree(detail);
  } catch (e) {
    if (e instanceof NodeTreeError) return null;
    throw e;
  }
}

/** Whether a tree belongs to the statement: it returns the same columns, by name. */
function treeMatches(tree: PgNode, statement: DescribedStatement): boolean {
  if (statement.columns.length === 0) return true;
  const names = returnedNames(tree);
  return names !== null && names.length === statement.columns.length &&
    names.every((n, i) => n === statement.columns[i].name);
}

/** Describes queries on one client whose session logs parse trees. */
class PgDescriber implements Describer {
  readonly #sql: Sql;
  readonly #options: TypegenOptions;
  readonly #rename: (name: string) => string;
  /** The parse trees logged while a batch is described (null between batches). */
  #trees: Notice[] | null = null;
  /** Describe calls run one after another: the log of trees belongs to one batch at a time. */
  #queue: Promise<unknown> = Promise.resolve();
  readonly #types = new Map<number, CatalogType>();
  /** The NOT NULL columns (attnums) of each relation already looked up. */
  readonly #notNull = new Map<number, Set<number>>();
  /** The relations among those with a BEFORE ROW trigger on insert or update. */
  readonly #triggered = new Set<number>();
  /** The tables among those with rules. */
  readonly #ruled = new Set<number>();
  #isRuled = (relid: number): boolean => this.#ruled.has(relid);
  /** The parse tree of each view's definition (views whose definition described). */
  readonly #views = new Map<number, PgNode>();
  /** Each view's columns proved non-null, once worked out. */
  readonly #viewNonNull = new Map<number, readonly boolean[]>();

  constructor(sql: Sql, options: TypegenOptions, notices: { on: (n: Notice) => void }) {
    this.#sql = sql;
    this.#options = options;
    this.#rename = columnName(options);
    notices.on = (n) => {
      if (this.#trees !== null && n.message === PARSE_TREE_MESSAGE) this.#trees.push(n);
    };
  }

  describe(texts: readonly string[]): Promise<QueryTypes[]> {
    const run = this.#queue.then(() => this.#describe(texts));
    this.#queue = run.catch(() => {});
    return run;
  }

  close(): Promise<void> {
    return this.#sql.end();
  }

  async #describe(texts: readonly string[]): Promise<QueryTypes[]> {
    const outcomes = await this.#describeAll(texts);
    await this.#lookUp(outcomes);
    return outcomes.map((o) => o.ok ? this.#typesOf(o.statement, o.tree) : o.types);
  }

  /** Describes every text at once, and pairs each statement with its logged parse tree. */
  async #describeAll(texts: readonly string[]): Promise<Outcome[]> {
    const [outcomes, trees] = await this.#logged(texts);
    if (outcomes.every((o) => o.ok) && trees.length === texts.length) {
      return outcomes.map((o, i) => this.#withTree(o, trees[i]));
    }
    // A failed statement may or may not have logged its tree, and an empty one logs none: so
    // describe again only those sure to log one each, whose order then pairs them up.
    const again = outcomes.flatMap((o, i) =>
      o.ok && (o.statement.columns.length > 0 || o.statement.types.length > 0) ? [i] : []
    );
    const [second, secondTrees] = await this.#logged(again.map((i) => texts[i]));
    const paired = second.every((o) => o.ok) && secondTrees.length === again.length;
    const out = outcomes.slice();
    again.forEach((i, k) => {
      out[i] = this.#withTree(outcomes[i], paired ? secondTrees[k] : undefined);
    });
    return out;
  }

  /** The describes of `texts` (pipelined) and the parse trees the session logged meanwhile. */
  async #logged(texts: readonly string[]): Promise<[Outcome[], Notice[]]> {
    const trees: Notice[] = [];
    this.#trees = trees;
    try {
      const outcomes = await Promise.all(
        texts.map((text) =>
          this.#sql.unsafe(text).describe().then(
            (statement): Outcome => ({ ok: true, statement, tree: null }),
            (e): Outcome => ({ ok: false, types: failure(e) }),
          )
        ),
      );
      return [outcomes, trees];
    } finally {
      this.#trees = null;
    }
  }

  /** The outcome with its tree, when the tree is readable and is the statement's. */
  #withTree(o: Outcome, notice: Notice | undefined): Outcome {
    if (!o.ok) return o;
    const tree = readTree(notice?.detail);
    return { ...o, tree: tree !== null && treeMatches(tree, o.statement) ? tree : null };
  }

  /** Asks the catalog what the outcomes' relations and types need, that is not known yet. */
  async #lookUp(outcomes: readonly Outcome[]): Promise<void> {
    const relations = new Set<number>();
    const oids = new Set<number>();
    for (const o of outcomes) {
      if (!o.ok) continue;
      if (o.tree !== null) { for (const r of relationsOf(o.tree)) relations.add(r); }
      for (const c of o.statement.columns) {
        if (c.table !== 0) relations.add(c.table);
        oids.add(c.type);
      }
      for (const t of o.statement.types) oids.add(t);
    }
    // One after the other: describing views' definitions pairs the parse trees logged in the
    // meantime with them, so no other statement may be in flight then.
    await this.#lookUpTypes(oids);
    await this.#lookUpRelations(relations);
  }

  /**
   * Fetches the NOT NULL columns and triggers of the relations not looked up yet; and, for the
   * views among them, describes each view's definition so its columns follow the same rules
   * (a view on views: round after round, as deep as they go).
   */
  async #lookUpRelations(relations: Iterable<number>): Promise<void> {
    let pending = [...new Set(relations)].filter((r) => !this.#notNull.has(r));
    while (pending.length > 0) {
      const ask = (query: string) => this.#sql.unsafe(query, [pending]);
      const [notNull, triggers, rules, views] = await Promise.all([
        ask(NOT_NULL_QUERY),
        ask(TRIGGER_QUERY),
        ask(RULE_QUERY),
        ask(VIEW_QUERY),
      ]);
      for (const row of rules) this.#ruled.add(Number(row.rel));
      for (const r of pending) this.#notNull.set(r, new Set());
      for (const row of notNull) this.#notNull.get(Number(row.rel))?.add(row.num as number);
      for (const row of triggers) this.#triggered.add(Number(row.rel));
      const next = new Set<number>();
      if (views.length > 0) {
        const defined = await this.#describeAll(views.map((v) => v.definition as string));
        defined.forEach((o, i) => {
          if (!o.ok || o.tree === null) return; // its columns stay nullable
          this.#views.set(Number(views[i].rel), o.tree);
          for (const r of relationsOf(o.tree)) next.add(r);
        });
      }
      pending = [...next].filter((r) => !this.#notNull.has(r));
    }
  }

  /** A view's columns proved non-null, by its definition's tree (computed once). */
  #viewColumns(relid: number): readonly boolean[] {
    let columns = this.#viewNonNull.get(relid);
    if (columns === undefined) {
      this.#viewNonNull.set(relid, []); // views cannot refer to themselves; still, never loop
      const tree = this.#views.get(relid);
      columns = tree === undefined ? [] : nonNullColumns(tree, this.#isNotNull, this.#isRuled);
      this.#viewNonNull.set(relid, columns);
    }
    return columns;
  }

  /** Fetches the user-defined types among `oids`, then their bases and elements, and so on. */
  async #lookUpTypes(oids: Iterable<number>): Promise<void> {
    let missing = typesToLookUp(oids, this.#types);
    while (missing.length > 0) {
      const rows = await this.#sql.unsafe(TYPE_QUERY, [missing]);
      for (const oid of missing) {
        this.#types.set(oid, { kind: "", base: 0, element: 0, labels: [] });
      }
      for (const row of rows) {
        this.#types.set(Number(row.oid), {
          kind: row.kind as string,
          base: Number(row.base),
          element: Number(row.element),
          labels: row.labels as string[],
        });
      }
      missing = typesToLookUp(
        rows.flatMap((r) => [Number(r.base), Number(r.element)]).filter((o) => o !== 0),
        this.#types,
      );
    }
  }

  #isNotNull = (relid: number, attnum: number): boolean =>
    this.#notNull.get(relid)?.has(attnum) === true ||
    (this.#views.has(relid) && this.#viewColumns(relid)[attnum - 1] === true);

  /**
   * Whether the server refuses a null written to the column: a table's NOT NULL column that no
   * trigger can fill first, and no rule send elsewhere. Not a view's: an INSTEAD OF trigger may
   * put the row anywhere.
   */
  #refusesNull = (relid: number, attnum: number): boolean =>
    this.#notNull.get(relid)?.has(attnum) === true && !this.#triggered.has(relid) &&
    !this.#ruled.has(relid);

  /** The model's types of a described statement. */
  #typesOf(statement: DescribedStatement, tree: PgNode | null): QueryTypes {
    const catalog: TypeCatalog = this.#types;
    const proved = tree === null ? [] : nonNullColumns(tree, this.#isNotNull, this.#isRuled);
    const required = tree === null ? new Set<number>() : requiredParams(tree, this.#refusesNull);
    // A row is an object: a later column of the same name overwrites the value of an earlier
    // one, at the earlier one's place.
    const columns: ColumnType[] = [];
    const at = new Map<string, number>();
    statement.columns.forEach((c, i) => {
      const column: ColumnType = {
        name: this.#rename(c.name),
        type: resultType(c.type, catalog, this.#options),
        nullable: proved[i] !== true,
      };
      const earlier = at.get(column.name);
      if (earlier === undefined) {
        at.set(column.name, columns.length);
        columns.push(column);
      } else columns[earlier] = column;
    });
    const params = statement.types.map((oid, i) => {
      const type = paramType(oid, catalog);
      // `unknown` (a json value) holds null already.
      return required.has(i + 1) || type === "unknown" ? type : `${type} | null`;
    });
    return { ok: true, columns, params };
  }
}

/** The client's options: one connection, the notices routed to the describer, no type fetch. */
function clientOptions(notices: { on: (n: Notice) => void }): Options {
  return {
    max: 1,
    fetch_types: false,
    onnotice: (n) => notices.on(n),
  };
}

/** Applies the migrations, in order; the first failure throws a MigrationError. */
async function migrate(sql: Sql, statements: readonly MigrationStatement[]): Promise<void> {
  for (const statement of statements) {
    try {
      await sql.unsafe(statement.text);
    } catch (e) {
      const position = e instanceof PostgresError && e.position !== undefined
        ? Number(e.position)
        : undefined;
      const reason = e instanceof Error ? e.message : String(e);
      throw new MigrationError(statement, lineOfPosition(statement, position), reason, e);
    }
  }
}

/**
 * Opens a describer against `source`:
 * - `{ migrations: dir }`: an in-process PGlite in memory, with the `.sql` files of `dir` applied
 *   in name order (Drizzle Kit's folder as it is); no server is contacted. A failing migration
 *   rejects with a {@link MigrationError} naming its file, statement and line.
 * - `{ database: url }`: that server (`undefined`: `DATABASE_URL`, else libpq's `PG*` variables).
 *
 * The session only describes: statements are parsed and described, never executed, and it is
 * read-only (`default_transaction_read_only`) besides.
 *
 * @example
 * ```ts
 * import { openDescriber } from "./describer.ts";
 * const describer = await openDescriber({ migrations: "./drizzle" }, { transform: "camel" });
 * const [types] = await describer.describe(["select id, created_at from users where id = $1"]);
 * // { ok: true, columns: [{ name: "id", type: "number", nullable: false }, ...], params: ["number | null"] }
 * await describer.close();
 * ```
 */
export async function openDescriber(
  source: SchemaSource,
  options: TypegenOptions,
): Promise<Describer> {
  const notices = { on: (_: Notice): void => {} };
  let sql: Sql;
  if ("migrations" in source) {
    const statements = await readMigrations(source.migrations);
    // The contrib extensions the migrations create are given to PGlite as it starts.
    const contrib = contribExtensionsOf(statements);
    const start = contrib.length === 0
      ? undefined
      : { extensions: await loadContribExtensions(contrib) };
    sql = createSql(undefined, pglite(start, clientOptions(notices)));
    try {
      await migrate(sql, statements);
    } catch (e) {
      await sql.end();
      throw e;
    }
  } else {
    const url = source.database ?? env("DATABASE_URL");
    sql = createSql(url, clientOptions(notices));
  }
  const describer = new PgDescriber(sql, options, notices);
  try {
    // First, so not even the setup's own trees reach the server's log; a refusal is no failure.
    await sql.unsafe(QUIET_SERVER_LOG).catch((e) => {
      if (!(e instanceof PostgresError)) throw e;
    });
    await sql.unsafe(SESSION_SETUP);
  } catch (e) {
    await sql.end();
    throw e;
  }
  return describer;
}

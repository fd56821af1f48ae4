// The Drizzle entries' npm import (those subpaths only), pinned where it is used rather than in
// an import map, so the package's configuration names no npm package.
// deno-lint-ignore-file no-import-prefix
/**
 * Drizzle's postgres-js session over a pgpipe client, with two changes. Statements are prepared as
 * the client's `prepare` option says (Drizzle's driver asks for the unnamed statement for every
 * query it was not given a name for, so the server would parse and plan each at every run). And
 * each statement is sent the moment Drizzle builds it. Drizzle's own prepared query calls
 * `client.unsafe(...)` (then `.values()` for rows it maps) and awaits it; a pgpipe query, like
 * postgres.js's, is sent only when awaited, and in a `Promise.all` of builders every `await` runs
 * after the last builder, so the server would start only once Drizzle had built them all. Started
 * at once instead, the queries reach the connection while Drizzle builds the rest, and the
 * connection writes a part of the batch early (see `Connection.#enqueue`): the server's work
 * overlaps Drizzle's.
 */
import type { Query as DrizzleQuery } from "npm:drizzle-orm@^0.45";
import type {
  PgPreparedQuery,
  PreparedQueryConfig,
  SelectedFieldsOrdered,
} from "npm:drizzle-orm@^0.45/pg-core";
import { PostgresJsSession } from "npm:drizzle-orm@^0.45/postgres-js/session";
import type { Sql } from "../client/client.ts";

/** Drizzle's session constructor's parameters. */
type SessionArgs = ConstructorParameters<typeof PostgresJsSession>;

/** `unsafe`'s options (its last overload's second parameter). */
type UnsafeOptions = Parameters<Sql["unsafe"]>[1];

/**
 * The client a prepared query calls: `unsafe` starts the query at once, in the row shape
 * Drizzle asks for next (`.values()` when it maps rows itself; calling it again is harmless).
 * Drizzle asks for the unnamed statement (`prepare: false`) for every query it was not given a
 * name for; here such a query is prepared as the client's `prepare` option says, as every other
 * query of the client is (Drizzle sends the same text for the same query shape).
 */
function sendingAtOnce(client: Sql, arrays: boolean): Sql {
  const prepare = client.options.prepare;
  const unsafe = (text: string, params?: readonly unknown[], options?: UnsafeOptions) => {
    const own = options?.prepare === false ? { ...options, prepare } : options;
    const query = client.unsafe(text, params, own);
    return (arrays ? query.values() : query).execute();
  };
  // Drizzle's prepared query calls nothing of its client but `unsafe`.
  return { unsafe } as unknown as Sql;
}

/** Drizzle's postgres-js session whose statements start as soon as they are built. */
// deno-lint-ignore no-explicit-any
export class SendingSession extends PostgresJsSession<any, any, any> {
  /** The client for queries whose rows Drizzle maps (arrays), and for the others (objects). */
  readonly #clients: readonly [Sql, Sql];

  constructor(...args: SessionArgs) {
    super(...args);
    const client = args[0] as unknown as Sql;
    this.#clients = [sendingAtOnce(client, true), sendingAtOnce(client, false)];
  }

  override prepareQuery<T extends PreparedQueryConfig = PreparedQueryConfig>(
    query: DrizzleQuery,
    fields: SelectedFieldsOrdered | undefined,
    name: string | undefined,
    isResponseInArrayMode: boolean,
    customResultMapper?: (rows: unknown[][]) => T["execute"],
    ...rest: unknown[]
  ): PgPreparedQuery<T> {
    const prepared = (super.prepareQuery as (...args: unknown[]) => PgPreparedQuery<T>)(
      query,
      fields,
      name,
      isResponseInArrayMode,
      customResultMapper,
      ...rest,
    );
    // Drizzle's query maps arrays when it has fields or a mapper, else takes objects as they are.
    const arrays = fields !== undefined || customResultMapper !== undefined;
    (prepared as unknown as { client: Sql }).client = this.#clients[arrays ? 0 : 1];
    return prepared;
  }
}

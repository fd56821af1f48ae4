/**
 * What `postgres()` returns: the `sql` over a pool, with the client's methods
 * (begin, reserve, listen, notify, subscribe, largeObject, end) and its
 * options shown back.
 */
import type { Options, ResolvedOptions } from "../config/options.ts";
import { resolveOptions } from "../config/resolve.ts";
import type { HostOptions } from "../connection/hosts.ts";
import type { Endpoint } from "../connection/transport/transport.ts";
import type { LargeObject } from "../large_object/large_object.ts";
import { Listener, type ListenHandle, type NotifyHandler } from "../listen/listen.ts";
import type { Result, ResultState } from "../query/result.ts";
import { clientDecode, queryConfig } from "../query/settings.ts";
import type { SubscribeHandler, Subscriber, SubscriptionHandle } from "../replication/subscribe.ts";
import { Telemetry } from "../telemetry/telemetry.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import type { TypeHandlers } from "../query/type_handlers.ts";
import { beginTransaction } from "./begin.ts";
import { type EmbeddedParts, embeddedParts, withEmbedded } from "./embedded.ts";
import { arrayTypesRequest } from "./fetch_types.ts";
import { Pool } from "./pool.ts";
import {
  boundSocket,
  type PublicOptions,
  publicOptions,
  type ShownAsGiven,
} from "./public_options.ts";
import { reserveConnection, type ReservedSql } from "./reserve.ts";
import type { ClientSettings } from "./runner.ts";
import { makeTag, type SqlTag } from "./sql.ts";
import type {
  Transaction,
  TransactionCallback,
  TransactionSql,
  UnwrapQueries,
} from "./transaction.ts";
import { StatementPolicy } from "../connection/statement_policy.ts";

/**
 * A client: call it as a tagged template to build a query, await the query to
 * run it. Queries issued concurrently are pipelined on one connection.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres("postgres://app@localhost/app");
 * const [user] = await sql`select * from users where id = ${1}`;
 * await sql.end();
 * ```
 */
export interface Sql extends SqlTag {
  /** The resolved options (the password only as non-enumerable `pass` and `password`). */
  readonly options: PublicOptions;
  /**
   * The server's parameters as it reports them (`server_version`, `TimeZone`,
   * `application_name`, ...): empty until the first connection is open, then
   * kept up to date as the server reports changes (the same object throughout).
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres();
   * await sql`select 1`;
   * console.log(sql.parameters.server_version);
   * ```
   */
  readonly parameters: Readonly<Record<string, string>>;
  /**
   * Runs `fn` in a transaction on a reserved connection: committed when `fn`
   * resolves, rolled back (and the error rethrown) when it throws. If `fn`
   * returns an array of queries they are awaited together (pipelined).
   */
  begin<T>(fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Same, with transaction modes, e.g. `"isolation level serializable"` or `"read only"`. */
  begin<T>(options: string, fn: (sql: TransactionSql) => T | Promise<T>): Promise<UnwrapQueries<T>>;
  /** Opens a transaction to use with `await using`; see {@link Transaction}. */
  begin(options?: string): Promise<Transaction>;
  /** Reserves a connection for this caller alone until `release()`. */
  reserve(): Promise<ReservedSql>;
  /**
   * Calls `fn` with each notification's payload on `channel`. Listening uses
   * one dedicated connection, reopened (and every channel listened to again)
   * if it is lost; `onlisten` is called each time listening (re)starts. Over an
   * embedded server (PGlite), which has one session, it listens on the client's
   * own connection instead.
   */
  listen(channel: string, fn: NotifyHandler, onlisten?: () => void): Promise<ListenHandle>;
  /** Sends a notification (`pg_notify`), the payload as a parameter. */
  notify(channel: string, payload: string): Promise<void>;
  /**
   * Calls `fn` for each row change that `pattern` matches, streamed by logical
   * replication (the `pgoutput` plugin) from the publications named by the
   * `publications` option (default `alltables`; create it yourself, e.g.
   * `create publication alltables for all tables`). The server needs
   * `wal_level = logical`, and the user the REPLICATION attribute (or superuser).
   *
   * `pattern` is `operation[:[schema.]table[=key]]`: the operation `*`,
   * `insert`, `update`, `delete` (or `truncate`, which `*` leaves out); the
   * schema defaults to `public`; `key` is the row's replica identity (primary
   * key) values joined by commas. `fn` gets the row (the new one, or for a
   * delete the old one or its key columns; null for a truncate) and
   * `{ command, relation, key, old }`, decoded with the client's types and
   * transforms.
   *
   * Every subscription of a client shares one replication connection (not
   * counted in `max`) and a TEMPORARY slot. If the connection is lost it is
   * reopened with a new slot (changes made meanwhile are not seen) and
   * `onsubscribe` runs again, as it does first when streaming starts. What
   * `fn` or `onsubscribe` throws, and a lost stream, go to `onerror` (else to
   * the console); nothing stops the stream.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * const sql = postgres({ publications: "alltables" });
   * const { unsubscribe } = await sql.subscribe(
   *   "update:users=1",
   *   (row, { command, old }) => console.log(command, old?.name, "->", row?.name),
   *   () => console.log("streaming: reload anything missed while away"),
   * );
   * await sql`update users set name = 'Ada' where id = 1`;
   * await unsubscribe();
   * ```
   */
  subscribe(
    pattern: string,
    fn: SubscribeHandler,
    onsubscribe?: () => void,
    onerror?: (err: Error) => void,
  ): Promise<SubscriptionHandle>;
  /**
   * Opens the large object `oid`, or creates one without it, in a transaction
   * on a reserved connection, as postgres.js does; `close()` on the result
   * commits and releases the connection. `mode` is `INV_WRITE | INV_READ`
   * (`0x20000 | 0x40000`, the default), or one of them.
   *
   * @example
   * ```ts
   * import postgres from "jsr:@pgpipe/pgpipe";
   * import { createReadStream } from "node:fs";
   * import { pipeline } from "node:stream/promises";
   * const sql = postgres();
   * const lo = await sql.largeObject();
   * await pipeline(createReadStream("photo.jpg"), await lo.writable());
   * await lo.close();
   * await sql`insert into photos (file) values (${lo.oid})`;
   * ```
   */
  largeObject(oid?: number, mode?: number): Promise<LargeObject>;
  /**
   * Waits for queries in flight, transactions and reserved connections (as postgres.js), then
   * closes every connection; with `timeout` (seconds), destroys them after it: queries in flight
   * reject with `CONNECTION_DESTROYED`, a transaction between queries with `CONNECTION_CLOSED`.
   */
  end(options?: { timeout?: number }): Promise<void>;
  /** The same as `end()` (Bun.sql's name). */
  close(options?: { timeout?: number }): Promise<void>;
  /** Same as `end()`, for `await using sql = postgres()`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Clients created in this process: numbers each one's pool name in telemetry. */
let clients = 0;

/** How each client made here reserves the connection one of its results ran on. */
const sessions = new WeakMap<Sql, (at: ResultState) => Promise<ReservedSql>>();

/**
 * Reserves for one caller the connection on which `result` of `sql` completed, so its session
 * (settings, sequence values, temporary tables) carries on; when that connection is gone, held
 * by someone else or busy with a COPY or cursor, or `sql` is not a client made here, any
 * connection, as `sql.reserve()`. The Kysely dialect's lease uses it (see src/kysely/driver.ts).
 */
export function reserveWhereRan(sql: Sql, result: Result<unknown>): Promise<ReservedSql> {
  const reserve = sessions.get(sql);
  return reserve === undefined || result.state.pid === 0 ? sql.reserve() : reserve(result.state);
}

/** The TLS settings beyond the mode and CA, as the transport takes them. */
function tlsEndpoint(resolved: ResolvedOptions): Partial<Endpoint> {
  const { tls } = resolved;
  return {
    ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
    sni: tls.sni,
    ...(tls.clientCertificate !== undefined ? { clientCertificate: tls.clientCertificate } : {}),
    minVersion: tls.minVersion,
    maxVersion: tls.maxVersion,
    needsServerCertificate: resolved.auth.channelBinding === "require",
    keepalive: resolved.keepalive,
  };
}

/**
 * The options of each connection the pool opens (`decode` is the client's decoding; `embedded`,
 * over an embedded server, routes notifications to `sql.listen`).
 */
function connectionOptions(
  resolved: ResolvedOptions,
  decode: DecodeOptions,
  embedded: EmbeddedParts | null,
): HostOptions {
  return {
    endpoint: {
      host: resolved.host,
      port: resolved.port,
      ...(resolved.hosts[0].address !== undefined ? { address: resolved.hosts[0].address } : {}),
      sslmode: resolved.sslmode,
      ca: resolved.ca,
      sslnegotiation: resolved.sslnegotiation,
      socket: boundSocket(resolved),
      embedded: resolved.embedded,
      ...tlsEndpoint(resolved),
    },
    failure: resolved.failure,
    hosts: {
      hosts: resolved.hosts,
      targetSessionAttrs: resolved.targetSessionAttrs,
      loadBalanceHosts: resolved.loadBalanceHosts,
    },
    params: resolved.params,
    password: resolved.password,
    protocolMinor: resolved.protocolMinor,
    protocolMinMinor: resolved.protocolMinMinor,
    auth: resolved.auth,
    connectTimeout: resolved.connectTimeout,
    maxPipeline: resolved.maxPipeline,
    maxPipelineBytes: resolved.maxPipelineBytes,
    maxStatements: resolved.maxStatements,
    decode,
    onnotice: resolved.onnotice,
    onparameter: resolved.onparameter,
    onnotify: embedded?.onnotify ?? resolved.onnotify,
    queryTimeout: resolved.queryTimeout,
  };
}

/**
 * The client's pool. With `fetch_types`, each new connection sends the catalog query ahead of
 * its first queries, as postgres.js's connections do, so a type created while the client runs
 * (a migration's enum) is known to the connections opened after it; what one finds serves all.
 */
function openPool(
  resolved: ResolvedOptions,
  decode: DecodeOptions,
  handlers: TypeHandlers,
  telemetry: Telemetry | null,
  embedded: EmbeddedParts | null,
): Pool {
  return new Pool(connectionOptions(resolved, decode, embedded), {
    maxQueue: resolved.maxQueue,
    max: resolved.max,
    idleTimeout: resolved.idleTimeout,
    maxLifetime: resolved.maxLifetime,
    debug: resolved.debug,
    telemetry,
    arrayTypes: resolved.fetchTypes ? () => arrayTypesRequest(handlers) : undefined,
    sessionStart: embedded?.sessionStart,
  });
}

/**
 * A part of a client imported on its first use (`get`). `end` ends it if it was ever asked for,
 * and a part asked for after the end is ended before it is used (so it refuses, as it would).
 */
function onFirstUse<T extends { end(): Promise<void> }>(
  load: () => Promise<T>,
): { get(): Promise<T>; end(): Promise<void> } {
  let part: Promise<T> | null = null;
  let ended = false;
  return {
    get: () =>
      part ??= load().then(async (p) => {
        if (ended) await p.end();
        return p;
      }),
    end: async () => {
      ended = true;
      if (part !== null) await (await part).end();
    },
  };
}

/** Creates a client; see {@link Options} and docs/configuration.md for the URL and environment rules. */
export function createSql(url?: string, options?: Options): Sql {
  const resolved = withEmbedded(resolveOptions(url, options), options, url);
  // Compiling `types` and `transform` checks them, before anything is started.
  const decode = clientDecode({ ...resolved, debug: resolved.debugStacks });
  const telemetry = Telemetry.of(resolved.telemetry, {
    database: resolved.database,
    host: resolved.host,
    port: resolved.port,
  });
  const config = queryConfig(decode);
  const statements = new StatementPolicy(resolved.prepare, resolved.forcePrepare);
  const settings: ClientSettings = { config, telemetry, statements };
  // One session (PGlite): sql.listen shares the pool's connection; sql.subscribe is refused.
  const embedded: EmbeddedParts | null = resolved.embedded === undefined ? null : embeddedParts(
    resolved,
    { send: (req): void => pool.send(req) },
    (): { pid: number; secret: number } => pool.connections[0] ?? { pid: 0, secret: 0 },
  );
  const pool = openPool(resolved, decode, config.handlers!, telemetry, embedded);
  telemetry?.observePool(
    `${resolved.user}@${resolved.host}:${resolved.port}/${resolved.database}#${++clients}`,
    () => pool.counts(),
    () => pool.connections,
  );
  const sql = makeTag(pool, settings, { shared: resolved.max > 1 }) as Sql;
  const listener = embedded?.listener ?? new Listener(pool.options);
  // Logical replication (src/replication/) is imported on a client's first subscribe.
  const subscriber = onFirstUse(async () =>
    new (await import("../replication/subscribe.ts")).Subscriber({
      connection: pool.options,
      decode,
      publications: resolved.publications,
      publicationNames: resolved.publicationNames,
    })
  );
  const begin = <T>(a?: string | TransactionCallback<T>, b?: TransactionCallback<T>) =>
    beginTransaction(pool, settings, a, b);
  const reserve = () => reserveConnection(pool, settings);
  sessions.set(sql, (at) => reserveConnection(pool, settings, at));
  // `sql.options` is built when first read (a first query never reads it); what it shows of the
  // caller's own options object is taken now, so a later change to that object does not show.
  const given: ShownAsGiven | undefined = options === undefined
    ? undefined
    : { connect_timeout: options.connect_timeout, types: options.types };
  let shown: PublicOptions | undefined;
  const end = async (o?: { timeout?: number }): Promise<void> => {
    telemetry?.close();
    await Promise.all([pool.end(o?.timeout), listener.end(), subscriber.end()]);
    await resolved.embedded?.end?.();
  };
  Object.defineProperties(sql, {
    options: {
      get: () => shown ??= publicOptions(resolved, given, pool.parameters, config, statements),
      enumerable: true,
    },
    parameters: { value: pool.parameters, enumerable: true },
    begin: { value: begin },
    reserve: { value: reserve },
    listen: { value: listener.listen.bind(listener) },
    subscribe: {
      value: embedded?.subscribe ??
        ((...args: Parameters<Subscriber["subscribe"]>) =>
          subscriber.get().then((s) => s.subscribe(...args))),
    },
    notify: {
      value: async (channel: string, payload: string) => {
        await sql`select pg_notify(${channel}, ${payload})`;
      },
    },
    largeObject: {
      value: (oid?: number, mode?: number) =>
        import("../large_object/large_object.ts").then((m) =>
          m.openLargeObject(() => begin() as Promise<Transaction>, oid, mode)
        ),
    },
    end: { value: end },
    close: { value: end },
    [Symbol.asyncDispose]: { value: () => end() },
  });
  return sql;
}

/**
 * The `sql` function: a tagged template that builds lazy queries, plus the
 * client methods hanging off it (`end`, `options`, async disposal).
 */
import { QueryRequest, type ResultTarget } from "../connection/query_request.ts";
import { QueryError } from "../errors.ts";
import { compile } from "../query/compile.ts";
import { Query, type QueryRunner } from "../query/query.ts";
import { Result, type Row } from "../query/result.ts";
import { inferOid, serialize } from "../types/encode.ts";
import { type Options, resolveOptions } from "./options.ts";
import { Pool } from "./pool.ts";

/** The most parameters one statement can carry (a 16-bit count in Bind). */
const MAX_PARAMETERS = 65535;

/** Options shown back on `sql.options` (the password is never exposed). */
export interface PublicOptions {
  /** Host or socket directory. */
  host: string;
  /** Port. */
  port: number;
  /** Database. */
  database: string;
  /** User. */
  user: string;
  /** TLS mode. */
  sslmode: string;
  /** Most connections. */
  max: number;
  /** Whether named prepared statements are used. */
  prepare: boolean;
  /** Most requests in flight per connection. */
  max_pipeline: number;
}

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
export interface Sql {
  /** Builds a query from a template; values become parameters. */
  <T extends readonly unknown[] = Row[]>(
    strings: TemplateStringsArray,
    ...values: unknown[]
  ): Query<T>;
  /** The resolved options (without the password). */
  readonly options: PublicOptions;
  /** Waits for queries in flight, then closes every connection; with `timeout` (seconds), destroys them after it. */
  end(options?: { timeout?: number }): Promise<void>;
  /** `await using sql = postgres()` ends the client when the scope exits. */
  [Symbol.asyncDispose](): Promise<void>;
}

function isTemplate(value: unknown): value is TemplateStringsArray {
  return Array.isArray(value) && Object.hasOwn(value, "raw");
}

/** Creates a client; see {@link Options} and the README for the URL and environment rules. */
export function createSql(url?: string, options?: Options): Sql {
  const resolved = resolveOptions(url, options);
  const pool = new Pool({
    endpoint: {
      host: resolved.host,
      port: resolved.port,
      sslmode: resolved.sslmode,
      ca: resolved.ca,
    },
    params: resolved.params,
    password: resolved.password,
    connectTimeout: resolved.connectTimeout,
    maxPipeline: resolved.maxPipeline,
    maxPipelineBytes: resolved.maxPipelineBytes,
    maxStatements: resolved.maxStatements,
    decode: { bigint: resolved.bigint },
    onnotice: resolved.onnotice,
    onparameter: resolved.onparameter,
    onnotify: resolved.onnotify,
  }, resolved.max);
  const prepare = resolved.prepare;

  const runner: QueryRunner = {
    run(query: Query<readonly unknown[]>): Promise<Result<unknown>> {
      return new Promise((resolve, reject) => {
        const { text, values } = compile(query);
        const n = values.length;
        if (n > MAX_PARAMETERS) {
          return reject(
            new QueryError(
              "MAX_PARAMETERS_EXCEEDED",
              `a query can have at most ${MAX_PARAMETERS} parameters; this one has ${n}`,
            ),
          );
        }
        if (text.includes("\0")) {
          return reject(new QueryError("NUL_IN_QUERY", "the query text contains a NUL byte"));
        }
        const params = new Array<string | null>(n);
        const types = new Array<number>(n);
        try {
          for (let i = 0; i < n; i++) {
            const value = values[i];
            params[i] = serialize(value);
            types[i] = inferOid(value);
          }
        } catch (e) {
          return reject(e);
        }
        const result = new Result<unknown>();
        pool.send(
          new QueryRequest(
            { text, params, types, prepare, mode: query.mode },
            result as unknown as ResultTarget,
            { resolve: resolve as (r: ResultTarget) => void, reject },
          ),
        );
      });
    },
  };

  const sql = function sql(strings: TemplateStringsArray, ...values: unknown[]) {
    if (!isTemplate(strings)) {
      throw new QueryError(
        "NOT_TAGGED_TEMPLATE",
        "sql must be used as a tagged template: sql`select ...`, not sql(...)",
      );
    }
    return new Query(strings, values, runner);
  } as Sql;

  const publicOptions: PublicOptions = {
    host: resolved.host,
    port: resolved.port,
    database: resolved.database,
    user: resolved.user,
    sslmode: resolved.sslmode,
    max: resolved.max,
    prepare,
    max_pipeline: resolved.maxPipeline,
  };
  Object.defineProperties(sql, {
    options: { value: publicOptions, enumerable: true },
    end: { value: (o?: { timeout?: number }) => pool.end(o?.timeout) },
    [Symbol.asyncDispose]: { value: () => pool.end() },
  });
  return sql;
}

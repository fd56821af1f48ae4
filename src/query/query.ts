/**
 * A lazy query: created by the `sql` tag, sent only when awaited (or
 * `.execute()`d). Until then it can be embedded in another query as a fragment.
 */
import type { Result, Row } from "./result.ts";

/** How rows are shaped. */
export type QueryMode = "object" | "array" | "raw";

/** Runs a query; supplied by the client that created it. */
export interface QueryRunner {
  /** Sends the query; the promise settles with its result. */
  run(query: Query<readonly unknown[]>): Promise<Result<unknown>>;
}

/**
 * A query built by the `sql` tag. It is a thenable: `await` runs it once and
 * every later `await` gets the same outcome.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres();
 * const users = await sql<{ id: number; name: string }[]>`select id, name from users`;
 * const pairs = await sql`select id, name from users`.values(); // [[1, "ada"], ...]
 * ```
 */
export class Query<T extends readonly unknown[] = Row[]> implements PromiseLike<Result<T[number]>> {
  /** The template's literal parts (the same object for every call of a given template). */
  readonly strings: TemplateStringsArray;
  /** The interpolated values: parameters, or fragments to inline. */
  readonly args: readonly unknown[];
  /** Row shape: objects, arrays of values, or arrays of raw bytes. */
  mode: QueryMode = "object";
  #runner: QueryRunner;
  #promise: Promise<Result<T[number]>> | null = null;

  /** Made by the `sql` tag; not meant to be called directly. */
  constructor(strings: TemplateStringsArray, args: readonly unknown[], runner: QueryRunner) {
    this.strings = strings;
    this.args = args;
    this.#runner = runner;
  }

  /** Rows as arrays of values in column order instead of objects. */
  values(): Query<unknown[][]> {
    this.mode = "array";
    return this as unknown as Query<unknown[][]>;
  }

  /** Rows as arrays of the raw bytes the server sent for each value (null for NULL). */
  raw(): Query<(Uint8Array | null)[][]> {
    this.mode = "raw";
    return this as unknown as Query<(Uint8Array | null)[][]>;
  }

  /** Sends the query now instead of when it is first awaited. */
  execute(): this {
    this.#start();
    return this;
  }

  #start(): Promise<Result<T[number]>> {
    return this.#promise ??= this.#runner.run(this) as Promise<Result<T[number]>>;
  }

  /** Runs the query (once) and settles with its result. */
  then<A = Result<T[number]>, B = never>(
    onfulfilled?: ((value: Result<T[number]>) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#start().then(onfulfilled, onrejected);
  }

  /** Runs the query (once) and handles its failure. */
  catch<B = never>(
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<Result<T[number]> | B> {
    return this.#start().catch(onrejected);
  }

  /** Runs the query (once) and calls `onfinally` when it settles. */
  finally(onfinally?: (() => void) | null): Promise<Result<T[number]>> {
    return this.#start().finally(onfinally);
  }

  /** Shown by `Object.prototype.toString`. */
  get [Symbol.toStringTag](): string {
    return "Query";
  }
}

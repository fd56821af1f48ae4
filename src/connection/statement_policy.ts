/**
 * The client's statement policy, in one place: whether a query uses a cached named statement or
 * the unnamed one (`prepare`, and each query's own `prepare`), `force_prepare`, which names the
 * statements of the queries that ask for the unnamed one (`sql.unsafe`, ORMs' drivers), and its
 * turning off when a pooler moves the session. The query side asks it which statement a query
 * gets, the request tells it when a forced statement vanished, and `sql.options` reads it.
 */

/** Which statement a query runs as. */
export type StatementUse = "named" | "forced" | "unnamed";

/** One client's statement policy, shared by every `sql` and connection of the client. */
export class StatementPolicy {
  /** The `prepare` option: queries that do not say otherwise use cached named statements. */
  readonly prepare: boolean;
  #forcing: boolean;

  /** `force_prepare` means something only while `prepare` is on. */
  constructor(prepare: boolean, forcePrepare: boolean) {
    this.prepare = prepare;
    this.#forcing = prepare && forcePrepare;
  }

  /** Whether `force_prepare` is in force (it turns itself off behind a pooler that moves sessions). */
  get forcing(): boolean {
    return this.#forcing;
  }

  /**
   * The statement for a query that asked for `asked` (its own `prepare`, or null for the
   * client's); a simple-protocol query has no statement to name.
   */
  use(asked: boolean | null, simple: boolean): StatementUse {
    if (asked ?? this.prepare) return "named";
    return this.#forcing && !simple ? "forced" : "unnamed";
  }

  /**
   * A statement `force_prepare` named vanished or its name was taken: a pooler moves the session
   * between server connections, so no statement can be kept; from now on queries that ask for
   * the unnamed statement get it.
   */
  sessionMoved(): void {
    this.#forcing = false;
  }
}

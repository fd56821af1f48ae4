/**
 * A compiled query as a request spec: the checks its text and values must
 * pass, its parameters as text with their type OIDs, and how it may be
 * pipelined on the sink it goes to. Runs once per query, on the hot path.
 */
import type { QuerySpec } from "../connection/requests/query_request.ts";
import { QueryError } from "../errors.ts";
import type { Query } from "../query/query.ts";
import type { QueryConfig } from "../query/settings.ts";
import { Oid } from "../types/oids.ts";
import {
  inferOid,
  Parameter,
  serialize,
  serializeCustom,
  serializeParameter,
} from "../types/encode.ts";
import type { StatementPolicy } from "../connection/statement_policy.ts";

/** The most parameters one query may carry (a 16-bit count in Bind; postgres.js's limit). */
const MAX_PARAMETERS = 65534;

/** What the specs of one runner share: the client's settings and what its sink is. */
export interface SpecSettings {
  /** The client's statement policy: which statement each query gets (`prepare`, `force_prepare`). */
  readonly statements: StatementPolicy;
  /** The sink is a pool of several connections (see checkText). */
  readonly shared: boolean;
  /** The sink is a transaction's connection: queries written together share one Sync. */
  readonly transaction: boolean;
  /**
   * The client's query settings, read at each query: `sql.options.serializers` changes while the
   * client runs.
   */
  readonly config: QueryConfig;
  /** What an `undefined` value becomes. */
  readonly undefinedValue: unknown;
}

/** A statement that opens a transaction block (checked only on a shared pool with max > 1). */
const OPENS_TRANSACTION = /^\s*(?:begin|start\s+transaction)\b/i;

/** Whether `text` may open a transaction: a cheap first-character test before the regex. */
function opensTransaction(text: string): boolean {
  const c = text.charCodeAt(0) | 32;
  return (c === 98 || c === 115 || c <= 32) && OPENS_TRANSACTION.test(text); // b, s, space
}

/**
 * Statements that start, end or roll back (to a savepoint) a transaction: inside sql.begin they
 * never share a batch, so an error earlier in a batch cannot make the server skip them.
 */
const CONTROLS_TRANSACTION =
  /^\s*(?:begin|start|commit|end|rollback|abort|savepoint|release|prepare\s+transaction)\b/i;

/** CONTROLS_TRANSACTION, after a first-letters test that rules out most statements cheaply. */
function controlsTransaction(text: string): boolean {
  const c = text.charCodeAt(0) | 32;
  if (c === 115) { // s: savepoint and start, but not select or set
    if ((text.charCodeAt(1) | 32) === 101) return false;
  } else if (c > 32 && c !== 97 && c !== 98 && c !== 99 && c !== 101 && c !== 112 && c !== 114) {
    return false; // not a, b, c, e, p, r, nor leading space
  }
  return CONTROLS_TRANSACTION.test(text);
}

/**
 * Throws a QueryError when a query with `text` and `n` parameters cannot be sent. On a shared
 * pool a transaction opened by a plain query would catch unrelated queries pipelined on its
 * connection, so it is refused (postgres.js's UNSAFE_TRANSACTION).
 */
function checkText(text: string, n: number, simple: boolean, shared: boolean): void {
  if (n > MAX_PARAMETERS) {
    throw new QueryError(
      "MAX_PARAMETERS_EXCEEDED",
      `a query can have at most ${MAX_PARAMETERS} parameters; this one has ${n}`,
    );
  }
  if (text.includes("\0")) {
    throw new QueryError("NUL_IN_QUERY", "the query text contains a NUL byte");
  }
  if (shared && opensTransaction(text)) {
    throw new QueryError(
      "UNSAFE_TRANSACTION",
      "a transaction on a pool of several connections needs sql.begin() or sql.reserve() " +
        "(or max: 1): queries sent meanwhile could run inside it",
    );
  }
  if (simple && n > 0) {
    throw new QueryError(
      "SIMPLE_QUERY_PARAMETERS",
      `the simple protocol cannot send parameters; this query has ${n}`,
    );
  }
}

/** Fills `params` (the values as text) and `types` (their OIDs, 0 to let the server infer). */
function encodeParameters(
  values: readonly unknown[],
  params: (string | null)[],
  types: number[],
  serializers: QueryConfig["serializers"],
  undef: unknown,
): void {
  // Untyped strings and numbers skip the serializers unless one is set for what they are sent as
  // (text, and untyped: see serializeCustom), so a client whose other types have serializers
  // (Drizzle's dates and JSON) keeps the fast path.
  const plain = serializers === null || (!serializers.has(Oid.text) && !serializers.has(0));
  for (let i = 0; i < values.length; i++) {
    let value = values[i];
    // The common cases first: strings and numbers go untyped (the server infers the type).
    if (plain) {
      if (typeof value === "string") {
        params[i] = value;
        types[i] = 0;
        continue;
      }
      if (typeof value === "number" && !(value === 0 && 1 / value < 0)) {
        params[i] = "" + value;
        types[i] = 0;
        continue;
      }
    }
    if (value instanceof Parameter) {
      types[i] = value.type;
      params[i] = serializeParameter(value, serializers, undef);
      continue;
    }
    if (value === undefined) value = undef; // still undefined: serialize rejects it
    const oid = inferOid(value);
    types[i] = oid;
    params[i] = serializers === null
      ? serialize(value, undef)
      : serializeCustom(value, oid, serializers, undef);
  }
}

/** Serialises a compiled query into a request spec; throws a QueryError on bad input. */
export function querySpec(
  query: Query<readonly unknown[]>,
  text: string,
  values: readonly unknown[],
  settings: SpecSettings,
): QuerySpec {
  const n = values.length;
  const simple = query.isSimple;
  checkText(text, n, simple, settings.shared);
  const params = new Array<string | null>(n);
  const types = new Array<number>(n);
  const config = settings.config;
  encodeParameters(values, params, types, config.serializers, settings.undefinedValue);
  const use = settings.statements.use(query.prepare, simple);
  const spec: QuerySpec = {
    text,
    params,
    values,
    types,
    prepare: use !== "unnamed",
    mode: query.mode,
  };
  if (simple) spec.simple = true;
  else if (use === "forced") spec.forced = settings.statements;
  if (settings.shared) spec.shared = true;
  // In a transaction an error aborts the block anyway: queries written together share a Sync.
  else if (settings.transaction && !simple && !controlsTransaction(text)) spec.batch = true;
  return spec;
}

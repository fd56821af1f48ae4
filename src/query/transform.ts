/**
 * The `transform` option and its presets (`postgres.camel`, ...), as in
 * postgres.js: `from` hooks shape results, `to` hooks shape the column names
 * the `sql(...)` helpers write, and `undefined` stands in for undefined values.
 */
import { QueryError } from "../errors.ts";

/**
 * A result column as the `value.from` hook receives it (when the connection
 * layer passes it; presets also work without it).
 *
 * @example
 * ```ts
 * import postgres, { type TransformColumn } from "jsr:@pgpipe/pgpipe";
 * const dates = (value: unknown, column?: TransformColumn) =>
 *   column?.type === 1082 ? String(value) : value;
 * const sql = postgres({ transform: { value: dates } });
 * ```
 */
export interface TransformColumn {
  /** Column name as the server reported it. */
  name: string;
  /** Type OID. */
  type: number;
}

/**
 * The `transform` option. Each hook is a function (`from`) or `{ from?, to? }`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({
 *   transform: {
 *     column: { from: (c) => c.toUpperCase(), to: (c) => c.toLowerCase() },
 *     row: (row) => ({ ...row, loadedAt: Date.now() }),
 *     undefined: null,
 *   },
 * });
 * ```
 */
export interface Transform {
  /** Sent instead of `undefined` values (e.g. `null`); when unset, `undefined` is an error. */
  undefined?: unknown;
  /** Column names: `from` maps result keys, `to` maps names written by `sql(...)` helpers. */
  column?: ((column: string) => string) | {
    /** Maps result column names to row keys. */
    from?: (column: string) => string;
    /** Maps identifiers and object keys in `sql(...)` helpers to column names. */
    to?: (column: string) => string;
  };
  /** Values: `from` maps each result value. */
  value?: ((value: any, column?: TransformColumn) => unknown) | {
    /** Maps each result value. */
    from?: (value: any, column?: TransformColumn) => unknown;
  };
  /** Rows: `from` maps each result row. */
  row?: ((row: any) => unknown) | {
    /** Maps each result row. */
    from?: (row: any) => unknown;
  };
}

/** The transform hooks, each resolved to a function or undefined. */
export interface Transforms {
  /** Substitute for `undefined` values (undefined: none, they are errors). */
  undefined: unknown;
  /** Result column name to row key. */
  columnFrom?: (column: string) => string;
  /** Helper identifier to column name. */
  columnTo?: (column: string) => string;
  /** Result value mapper. */
  valueFrom?: (value: any, column?: TransformColumn) => unknown;
  /** Result row mapper. */
  rowFrom?: (row: any) => unknown;
}

function hook<F>(
  name: string,
  x: F | { from?: F; to?: F } | undefined,
  dir: "from" | "to",
): F | undefined {
  if (x === undefined || x === null) return undefined;
  const fn = typeof x === "function"
    ? (dir === "from" ? x : undefined)
    : (x as { [k: string]: F })[dir];
  if (fn !== undefined && typeof fn !== "function") {
    throw new QueryError("INVALID_TRANSFORM", `transform.${name}.${dir} must be a function`);
  }
  return fn;
}

/** Resolves the `transform` option into plain hooks; throws `INVALID_TRANSFORM` on a non-function. */
export function normalizeTransform(t: Transform | undefined): Transforms {
  if (t === undefined) return { undefined: undefined };
  return {
    undefined: t.undefined,
    columnFrom: hook("column", t.column, "from"),
    columnTo: hook("column", t.column, "to"),
    valueFrom: hook("value", t.value, "from"),
    rowFrom: hook("row", t.row, "from"),
  };
}

// ----------------------------------------------------------------------------
// Case conversions. They only convert to or from snake_case, as in postgres.js.

/** Joins `_`-separated words, upper-casing each word's first letter after the first. */
function joinWords(s: string, first: string): string {
  let out = first;
  for (let i = 1; i < s.length; i++) {
    if (s[i] === "_" && i + 1 < s.length) out += s[++i].toUpperCase();
    else out += s[i];
  }
  return out;
}

/** Splits before each capital letter with `_`, lower-cased. */
function splitWords(s: string): string {
  return s.replace(/[A-Z]/g, (c) => "_" + c).toLowerCase();
}

function jsonKeys(
  rename: (key: string) => string,
): (value: any, column?: TransformColumn) => unknown {
  const walk = (x: unknown): unknown => {
    if (typeof x !== "object" || x === null) return x;
    if (Array.isArray(x)) return x.map(walk);
    const proto = Object.getPrototypeOf(x);
    if (proto !== Object.prototype && proto !== null) return x; // Date, Uint8Array, ...
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) out[rename(k)] = walk(v);
    return out;
  };
  // Only json and jsonb values carry keys to rename; without column info, plain objects are json.
  return (value, column) =>
    column === undefined || column.type === 114 || column.type === 3802 ? walk(value) : value;
}

/**
 * A one-way preset for results: the case function itself, also usable as a
 * `transform` option.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.toCamel("created_at"); // "createdAt"
 * const sql = postgres({ transform: postgres.toCamel });
 * ```
 */
export interface CaseFrom {
  /** Converts one name. */
  (name: string): string;
  /** Result column names are converted. */
  column: { from: (name: string) => string };
  /** Keys inside json/jsonb results are converted. */
  value: { from: (value: any, column?: TransformColumn) => unknown };
}

/**
 * A one-way preset for names written by the helpers: the case function itself,
 * also usable as a `transform` option.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ transform: postgres.fromCamel });
 * await sql`insert into users ${sql({ createdAt: new Date() })}`; // ("created_at")
 * ```
 */
export interface CaseTo {
  /** Converts one name. */
  (name: string): string;
  /** Names written by `sql(...)` helpers are converted. */
  column: { to: (name: string) => string };
}

/**
 * A two-way preset (`postgres.camel`, ...); spread it to add `undefined`.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ transform: { ...postgres.camel, undefined: null } });
 * ```
 */
export interface CaseBoth {
  /** Result names from snake_case, helper names to snake_case. */
  column: { from: (name: string) => string; to: (name: string) => string };
  /** Keys inside json/jsonb results are converted. */
  value: { from: (value: any, column?: TransformColumn) => unknown };
}

function caseFrom(fn: (name: string) => string): CaseFrom {
  return Object.assign(fn, { column: { from: fn }, value: { from: jsonKeys(fn) } });
}

function caseTo(fn: (name: string) => string): CaseTo {
  return Object.assign(fn, { column: { to: fn } });
}

function both(from: CaseFrom, to: CaseTo): CaseBoth {
  return { column: { from, to }, value: from.value };
}

/**
 * snake_case to camelCase; as a `transform` option, for result columns and json keys.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.toCamel("user_id"); // "userId"
 * const sql = postgres({ transform: postgres.toCamel });
 * ```
 */
export const toCamel: CaseFrom = caseFrom((s) => joinWords(s, s.slice(0, 1)));
/**
 * camelCase to snake_case; as a `transform` option, for names written by helpers.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.fromCamel("userId"); // "user_id"
 * ```
 */
export const fromCamel: CaseTo = caseTo(splitWords);
/**
 * snake_case to PascalCase; as a `transform` option, for result columns and json keys.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.toPascal("user_id"); // "UserId"
 * ```
 */
export const toPascal: CaseFrom = caseFrom((s) => joinWords(s, s.slice(0, 1).toUpperCase()));
/**
 * PascalCase to snake_case; as a `transform` option, for names written by helpers.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.fromPascal("UserId"); // "user_id"
 * ```
 */
export const fromPascal: CaseTo = caseTo((s) =>
  s.slice(0, 1).toLowerCase() + splitWords(s.slice(1))
);
/**
 * snake_case to kebab-case; as a `transform` option, for result columns and json keys.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.toKebab("user_id"); // "user-id"
 * ```
 */
export const toKebab: CaseFrom = caseFrom((s) => s.replaceAll("_", "-"));
/**
 * kebab-case to snake_case; as a `transform` option, for names written by helpers.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * postgres.fromKebab("user-id"); // "user_id"
 * ```
 */
export const fromKebab: CaseTo = caseTo((s) => s.replaceAll("-", "_"));

/**
 * Two-way camelCase: result columns (and json keys) become camelCase, helper
 * names become snake_case.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ transform: postgres.camel });
 * await sql`insert into users ${sql({ firstName: "Ada" })}`; // ("first_name") values ($1)
 * const [user] = await sql`select first_name from users`; // { firstName: "Ada" }
 * ```
 */
export const camel: CaseBoth = both(toCamel, fromCamel);
/**
 * Two-way PascalCase, like {@linkcode camel}.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ transform: postgres.pascal });
 * ```
 */
export const pascal: CaseBoth = both(toPascal, fromPascal);
/**
 * Two-way kebab-case, like {@linkcode camel}.
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 * const sql = postgres({ transform: { ...postgres.kebab, undefined: null } });
 * ```
 */
export const kebab: CaseBoth = both(toKebab, fromKebab);

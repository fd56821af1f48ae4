/**
 * Typed parameters: `sql.typed(value, oid)`, `sql.json(value)` and
 * `sql.array(values, type?)`. The value is kept as given and serialised when
 * the query runs, so custom serializers of the `types` option apply.
 */
import { QueryError } from "../errors.ts";
import { inferOid, Parameter } from "../types/encode.ts";
import { arrayOf, elementOf, Oid } from "../types/oids.ts";

function isOid(x: unknown): x is number {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= 0xffffffff;
}

/** A parameter sent with type `oid`; throws `INVALID_TYPE` when `oid` is not a type OID. */
export function typed(value: unknown, oid: number): Parameter {
  if (!isOid(oid)) {
    throw new QueryError("INVALID_TYPE", `a type OID is a non-negative integer, got ${oid}`);
  }
  return new Parameter(value, oid);
}

/** A jsonb parameter (postgres.js types `sql.json` as jsonb): the value's JSON text. */
export function json(value: unknown): Parameter {
  return new Parameter(value, Oid.jsonb);
}

/** The first non-null leaf of a (nested) array, or undefined. */
function firstLeaf(values: readonly unknown[]): unknown {
  for (const v of values) {
    if (v === null || v === undefined) continue;
    if (!Array.isArray(v)) return v;
    const leaf = firstLeaf(v);
    if (leaf !== undefined) return leaf;
  }
  return undefined;
}

/**
 * An array parameter. `type` is the element type OID (`23` for int4[]) or the
 * array type OID itself (`1007`); an OID unknown to pgpipe is sent as 0 so the
 * server infers the array type from the query. Without `type` the element type
 * is inferred from the first non-null element, as in postgres.js: strings and
 * numbers make text[] (give `type` for int4[] and the like), booleans,
 * bigints, Dates, Uint8Arrays and typed values (`sql.typed.point(...)`) their
 * types' arrays; objects are left for the server to infer (json[], jsonb[]),
 * and so is an empty array.
 */
export function array(values: readonly unknown[], type?: number): Parameter {
  if (!Array.isArray(values)) {
    throw new QueryError("INVALID_TYPE", "sql.array needs an array of values");
  }
  if (type !== undefined) {
    if (!isOid(type)) {
      throw new QueryError("INVALID_TYPE", `a type OID is a non-negative integer, got ${type}`);
    }
    if (arrayOf[type] !== undefined) return new Parameter(values, arrayOf[type], type);
    if (elementOf[type] !== undefined) return new Parameter(values, type, elementOf[type]);
    return new Parameter(values, 0, type);
  }
  const leaf = firstLeaf(values);
  // As in postgres.js: strings and numbers (and nulls) make text[]; typed leaves their type's
  // array; objects (JSON) are left for the server to infer (a json[] or jsonb[] column).
  const element = leaf instanceof Parameter
    ? leaf.type
    : values.length === 0 || (typeof leaf === "object" && leaf !== null && inferOid(leaf) === 0)
    ? 0
    : inferOid(leaf) || Oid.text;
  const oid = arrayOf[element] ?? 0;
  return new Parameter(values, oid, element);
}

/**
 * PostgreSQL types as TypeScript type text: for a result column, what pgpipe's decoders return
 * for that type OID at run time (src/types/text_decoders.ts, and the array parsers `fetch_types`
 * registers for user-defined types); for a parameter, the values pgpipe sends as that type.
 * test/typegen_describe_test.ts runs a query of every type and checks each value against the
 * text written here, so the two cannot drift apart.
 */
import { elementOf, FIRST_USER_OID, Oid } from "../types/oids.ts";
import type { TypegenOptions } from "./model.ts";

/** What the describer read of a type from `pg_type` (and `pg_enum`). */
export interface CatalogType {
  /** `typtype`: b base, c composite, d domain, e enum, p pseudo, r range, m multirange. */
  kind: string;
  /** `typbasetype`: a domain's base type (0 otherwise). */
  base: number;
  /** `typelem` of an array type (`typcategory` A), else 0. */
  element: number;
  /** An enum's labels in their sort order (empty otherwise). */
  labels: string[];
}

/** The types the catalog was asked about, by OID. */
export type TypeCatalog = ReadonlyMap<number, CatalogType>;

/** The text of an array of `element` whose elements may be null (PostgreSQL cannot forbid it). */
function arrayOfText(element: string, readonly: boolean): string {
  // `unknown` (a json element) already holds null.
  const of = element === "unknown" ? "unknown" : `(${element} | null)`;
  return `${readonly ? "readonly " : ""}${of}[]`;
}

/** A string literal type for each label, in sort order. */
function labelUnion(labels: readonly string[]): string {
  return labels.length === 0 ? "never" : labels.map((l) => JSON.stringify(l)).join(" | ");
}

/** What pgpipe's decoder for a built-in scalar type returns (every other type stays a string). */
function builtinResult(oid: number, options: TypegenOptions): string {
  switch (oid) {
    case Oid.bool:
      return "boolean";
    case Oid.int2:
    case Oid.int4:
    case Oid.oid:
    case Oid.float4:
    case Oid.float8:
      return "number";
    case Oid.int8:
      return options.bigint ? "bigint" : "string";
    case Oid.bytea:
      return "Buffer";
    case Oid.date:
    case Oid.timestamp:
    case Oid.timestamptz:
      return "Date";
    case Oid.json:
    case Oid.jsonb:
      // JSON.parse's result: any JSON value. `unknown` needs no import in the user's file and
      // makes the reader narrow it, which is the truth about a json column.
      return "unknown";
    default:
      return "string";
  }
}

/**
 * The TypeScript type of a result value of type `oid` (without `| null`), as pgpipe returns it
 * with `fetch_types` on (its default): built-in arrays and arrays of user-defined types are
 * arrays; an enum is the union of its labels; a domain is its base type (the server reports
 * a domain column as its base type anyway); composite, range and unknown types are strings.
 */
export function resultType(oid: number, catalog: TypeCatalog, options: TypegenOptions): string {
  const builtinElement = elementOf[oid];
  if (builtinElement !== undefined) {
    return arrayOfText(builtinResult(builtinElement, options), false);
  }
  if (oid < FIRST_USER_OID) return builtinResult(oid, options);
  const t = catalog.get(oid);
  if (t === undefined) return "string";
  if (t.kind === "e") return labelUnion(t.labels);
  if (t.kind === "d" && t.base !== 0) return resultType(t.base, catalog, options);
  if (t.element !== 0) {
    // fetch_types parses the array with its element's own decoder: an enum's labels stay
    // strings, and a user-defined element type has no decoder, so it too stays a string.
    const element = catalog.get(t.element);
    const text = element?.kind === "e"
      ? labelUnion(element.labels)
      : t.element < FIRST_USER_OID
      ? builtinResult(t.element, options)
      : "string";
    return arrayOfText(text, false);
  }
  return "string";
}

/** The values pgpipe sends as a built-in scalar type without an error. */
function builtinParam(oid: number): string {
  switch (oid) {
    case Oid.bool:
      return "boolean";
    case Oid.int2:
    case Oid.int4:
    case Oid.oid:
    case Oid.float4:
    case Oid.float8:
      return "number";
    case Oid.int8:
      // What pgpipe reads back (a string, or a bigint in bigint mode) must go in again.
      return "bigint | number | string";
    case Oid.numeric:
      return "bigint | number | string";
    case Oid.bytea:
      return "Uint8Array";
    case Oid.date:
    case Oid.timestamp:
    case Oid.timestamptz:
      return "Date | string";
    case Oid.json:
    case Oid.jsonb:
      // Any value with a JSON form goes (a string as JSON text already); `unknown`, as a json
      // column reads, so that a value read from one can be written back without a cast.
      return "unknown";
    default:
      return "string";
  }
}

/**
 * The TypeScript type accepted for a parameter of type `oid` (without `| null`): numbers for
 * the number types (so a string where the server wants `int4` fails `deno check`), strings for
 * the text-like and unknown types, an enum's labels, a domain's base type, readonly arrays.
 */
export function paramType(oid: number, catalog: TypeCatalog): string {
  const builtinElement = elementOf[oid];
  if (builtinElement !== undefined) return arrayOfText(builtinParam(builtinElement), true);
  if (oid < FIRST_USER_OID) return builtinParam(oid);
  const t = catalog.get(oid);
  if (t === undefined) return "string";
  if (t.kind === "e") return labelUnion(t.labels);
  if (t.kind === "d" && t.base !== 0) return paramType(t.base, catalog);
  if (t.element !== 0) return arrayOfText(paramType(t.element, catalog), true);
  return "string";
}

/**
 * The OIDs among `oids` (and the domains' bases and arrays' elements already known) whose
 * catalog entry is still needed to map them.
 */
export function typesToLookUp(oids: Iterable<number>, catalog: TypeCatalog): number[] {
  const out = new Set<number>();
  const visit = (oid: number): void => {
    if (oid < FIRST_USER_OID || out.has(oid)) return;
    const t = catalog.get(oid);
    if (t === undefined) {
      out.add(oid);
      return;
    }
    if (t.kind === "d") visit(t.base);
    if (t.element !== 0) visit(t.element);
  };
  for (const oid of oids) visit(oid);
  return [...out];
}

/**
 * The columns a bulk COPY moves and their types, looked up once per COPY from
 * the catalog (or taken from the caller): binary COPY needs every column's
 * exact type, including what a domain stands for (its binary form is its base
 * type's), whether a type is an enum (its binary form is its label), and an
 * array's declared element type (which the server checks in the array header).
 */
import { QueryRequest, type ResultTarget } from "../connection/requests/query_request.ts";
import type { PipelineRequest } from "../connection/requests/request.ts";
import { QueryError } from "../errors.ts";
import { arrayOf, elementOf, Oid, type OidName } from "../types/oids.ts";
import { driverRows } from "../connection/requests/driver_queries.ts";

/** Where the driver's own queries go: the pool, or the caller's connection. */
export interface CopySink {
  /** Sends a request. */
  send(req: PipelineRequest): void;
  /** Cancels a request (see Connection.cancel). */
  cancel(req: PipelineRequest, reason: Error): void;
}

/** One column of a bulk COPY. */
export interface CopyColumn {
  /** The column's name in the table (or in the query's result). */
  name: string;
  /** The key of object rows (the name before the client's `transform.column.to`). */
  key: string;
  /** The declared type OID. */
  type: number;
  /** The type a domain stands for (through every level); `type` itself otherwise. */
  base: number;
  /** The base type's kind (pg_type.typtype): `b` base, `e` enum, `c` composite, `r` range... */
  kind: string;
  /** For an array: its element type OID as the array header carries it; 0 otherwise. */
  element: number;
  /** The element's type after domains (0 when not an array). */
  elementBase: number;
  /** The element base type's kind. */
  elementKind: string;
  /** The table's OID and the column's number, as a query result's columns report them. */
  table: number;
  /** The column's attribute number (0 when unknown). */
  number: number;
}

/**
 * The table's columns in order, generated ones left out (COPY refuses them),
 * each with its type resolved through domains.
 */
const COLUMNS_SQL = `with recursive chain(root, oid, kind, next) as (
  select t.oid, t.oid, t.typtype, t.typbasetype from pg_catalog.pg_type t
   where t.oid in (select atttypid from pg_catalog.pg_attribute where attrelid = $1::regclass)
  union all
  select c.root, t.oid, t.typtype, t.typbasetype
    from chain c join pg_catalog.pg_type t on t.oid = c.next where c.kind = 'd'
)
select a.attname::text, a.atttypid, b.oid, b.typtype::text,
  case when b.typlen = -1 and b.typelem <> 0 then b.typelem else 0::oid end,
  e.oid, e.typtype::text, a.attrelid, a.attnum::int4
from pg_catalog.pg_attribute a
join chain ch on ch.root = a.atttypid and ch.kind <> 'd'
join pg_catalog.pg_type b on b.oid = ch.oid
left join lateral (
  with recursive ec(oid, typtype, next) as (
    select t.oid, t.typtype, t.typbasetype from pg_catalog.pg_type t
     where t.oid = b.typelem and b.typlen = -1
    union all
    select t.oid, t.typtype, t.typbasetype
      from ec join pg_catalog.pg_type t on t.oid = ec.next where ec.typtype = 'd'
  ) select oid, typtype from ec where typtype <> 'd'
) e on true
where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped and a.attgenerated = ''
order by a.attnum`;

/**
 * The result columns of a query (Parse and Describe only), asked on the same
 * sink as the COPY: on a transaction's connection, never the pool's.
 */
export function describeColumns(sink: CopySink, text: string): Promise<CopyColumn[]> {
  return new Promise((resolve, reject) => {
    const target: ResultTarget = {
      push: () => 0,
      length: 0,
      command: "",
      count: 0,
      columns: null,
      statement: null,
    };
    const done = (r: ResultTarget) => resolve(resultColumns(r.statement?.columns ?? []));
    sink.send(
      new QueryRequest(
        {
          text,
          params: [],
          types: [],
          prepare: false,
          mode: "array",
          describeOnly: true,
          decode: { bigint: false },
        },
        target,
        { resolve: done, reject },
      ),
    );
  });
}

/** The insertable columns of `table` (a quoted, possibly schema-qualified name), in order. */
export async function tableColumns(sink: CopySink, table: string): Promise<CopyColumn[]> {
  const rows = await driverRows(sink, COLUMNS_SQL, [table]);
  return rows.map((r) => ({
    name: r[0] as string,
    key: r[0] as string,
    type: r[1] as number,
    base: r[2] as number,
    kind: r[3] as string,
    element: r[4] as number,
    elementBase: (r[5] as number | null) ?? 0,
    elementKind: (r[6] as string | null) ?? "",
    table: r[7] as number,
    number: r[8] as number,
  }));
}

/**
 * The columns named by `keys` (mapped to table names by `columnTo`), in that
 * order; a name the table lacks is refused before anything is sent.
 */
export function pickColumns(
  all: readonly CopyColumn[],
  keys: readonly string[],
  columnTo: ((name: string) => string) | undefined,
  table: string,
): CopyColumn[] {
  const byName = new Map(all.map((c) => [c.name, c]));
  return keys.map((key) => {
    const name = columnTo === undefined ? key : columnTo(key);
    const column = byName.get(name);
    if (column === undefined) {
      throw new QueryError(
        "UNDEFINED_COLUMN",
        `${table} has no column ${JSON.stringify(name)} that COPY can fill or read ` +
          "(generated columns are left out)",
      );
    }
    return { ...column, key };
  });
}

/**
 * A type given by OID or by built-in name (`"int8"`, `"jsonb"`, `"text[]"`).
 *
 * @example
 * ```ts
 * import postgres from "jsr:@pgpipe/pgpipe";
 *
 * await using sql = postgres();
 * await sql.copyFrom("points", [[1, 2.5]], { columns: ["id", "v"], types: ["int4", 701] });
 * ```
 */
export type CopyType = number | string;

/** A type OID from a number or a built-in type name; `INVALID_TYPE` otherwise. */
export function typeOid(type: CopyType): number {
  if (typeof type === "number" && Number.isInteger(type) && type > 0 && type <= 0xffffffff) {
    return type;
  }
  if (typeof type === "string") {
    const array = type.endsWith("[]");
    const name = (array ? type.slice(0, -2) : type) as OidName;
    const oid = Object.hasOwn(Oid, name) ? Oid[name] : undefined;
    if (oid !== undefined && !array) return oid;
    if (oid !== undefined && arrayOf[oid] !== undefined) return arrayOf[oid];
  }
  throw new QueryError(
    "INVALID_TYPE",
    `a column type is a type OID or a built-in type name such as "int8" or "text[]", got ${
      JSON.stringify(type) ?? typeof type
    }`,
  );
}

/** Columns with the types the caller gave (no lookup): built-in types as they are. */
export function givenColumns(
  keys: readonly string[],
  types: readonly CopyType[],
  columnTo: ((name: string) => string) | undefined,
): CopyColumn[] {
  return keys.map((key, i) => {
    const type = typeOid(types[i]);
    const element = elementOf[type] ?? 0;
    return {
      name: columnTo === undefined ? key : columnTo(key),
      key,
      type,
      base: type,
      kind: "b",
      element,
      elementBase: element,
      elementKind: element === 0 ? "" : "b",
      table: 0,
      number: 0,
    };
  });
}

/** Columns of a described query's result. */
export function resultColumns(
  columns: readonly { name: string; type: number; table: number; number: number }[],
): CopyColumn[] {
  return columns.map((c) => {
    const element = elementOf[c.type] ?? 0;
    return {
      name: c.name,
      key: c.name,
      type: c.type,
      base: c.type,
      kind: "b",
      element,
      elementBase: element,
      elementKind: element === 0 ? "" : "b",
      table: c.table,
      number: c.number,
    };
  });
}

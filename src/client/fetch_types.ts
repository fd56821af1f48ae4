/**
 * `fetch_types`: user-defined types (enums, domains, composites) have array
 * types the driver cannot know in advance. One query per client, before the
 * first connection takes work, registers an array decoder for each, so
 * `my_enum[]` arrives as an array instead of its text literal.
 */
import type { Connection } from "../connection/connection.ts";
import { QueryRequest } from "../connection/query_request.ts";
import { parseArrayLiteral } from "../types/array_literal.ts";
import { type DecodeOptions, decoderFor, type TextDecoderFn } from "../types/text_decoders.ts";

/** User-defined types start at this OID (FirstNormalObjectId). */
const FIRST_USER_OID = 16384;

// int8: OIDs are unsigned 32-bit, and int4 would turn those past 2^31 negative.
const PLAIN = { bigint: false } as const;

const QUERY = "select t.oid::int8, t.typarray::int8, t.typdelim::text from pg_catalog.pg_type t " +
  `where t.typarray <> 0 and t.oid >= ${FIRST_USER_OID}`;

function rows(conn: Connection): Promise<unknown[][]> {
  return new Promise((resolve, reject) => {
    const out: unknown[][] = [];
    conn.send(
      new QueryRequest(
        // Plain decoding: the user's transforms (row, value, column) must not reshape these rows.
        { text: QUERY, params: [], types: [], prepare: false, mode: "array", decode: PLAIN },
        {
          push: (row) => out.push(row as unknown[]),
          length: 0,
          command: null,
          count: null,
          columns: null,
          statement: null,
        },
        { resolve: () => resolve(out), reject },
      ),
    );
  });
}

/** Adds array decoders for the server's user-defined types to `decode.parsers`. */
export async function fetchArrayTypes(conn: Connection, decode: DecodeOptions): Promise<void> {
  const parsers = new Map<number, TextDecoderFn>(decode.parsers ?? []);
  for (const [elemText, arrayText, delimiter] of await rows(conn)) {
    const elem = Number(elemText);
    const array = Number(arrayText);
    if (parsers.has(array)) continue; // the user's own parser wins
    const element = parsers.get(elem) ?? decoderFor(elem, decode);
    parsers.set(
      array,
      (text) => parseArrayLiteral(text, element, (delimiter as string) || ","),
    );
  }
  decode.parsers = parsers;
}

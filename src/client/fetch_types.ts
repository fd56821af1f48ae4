/**
 * `fetch_types`: user-defined types (enums, domains, composites) have array
 * types the driver cannot know in advance. One catalog query, sent ahead of
 * the first queries of a client's connections (in the same write, behind
 * authentication), registers an array decoder for each, so `my_enum[]`
 * arrives as an array instead of its text literal.
 */
import type { QueryRequest } from "../connection/requests/query_request.ts";
import { driverRowsRequest } from "../connection/requests/driver_queries.ts";
import { parseArrayLiteral } from "../types/array_literal.ts";
import { type DecodeOptions, decoderFor, type TextDecoderFn } from "../types/text_decoders.ts";

/** User-defined types start at this OID (FirstNormalObjectId). */
const FIRST_USER_OID = 16384;

// int8: OIDs are unsigned 32-bit, and int4 would turn those past 2^31 negative.
const QUERY = "select t.oid::int8, t.typarray::int8, t.typdelim::text from pg_catalog.pg_type t " +
  `where t.typarray <> 0 and t.oid >= ${FIRST_USER_OID}`;

/** Adds an array decoder to `decode.parsers` for each (element, array, delimiter) row. */
function register(rows: unknown[][], decode: DecodeOptions): void {
  const parsers = new Map<number, TextDecoderFn>(decode.parsers ?? []);
  for (const [elemText, arrayText, delimiter] of rows) {
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

/**
 * The catalog query as a request. Its decoders are registered the moment its answer is
 * complete, before the read loop reads on: a query written behind it on the same connection
 * already decodes with them. `done` is told whether it succeeded (a failure leaves the types
 * to the next connection; the queries behind it run as they would without them).
 */
export function arrayTypesRequest(
  decode: DecodeOptions,
  done: (ok: boolean) => void,
): QueryRequest {
  return driverRowsRequest(QUERY, [], {
    resolve: (rows) => {
      register(rows, decode);
      done(true);
    },
    reject: () => done(false),
  });
}

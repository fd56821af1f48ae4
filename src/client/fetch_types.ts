/**
 * `fetch_types`: user-defined types (enums, domains, composites) have array types the driver
 * cannot know in advance. One catalog query, sent in the first write of each of a client's
 * connections behind the queries that waited for it (the server answers them first: on a fresh
 * backend the catalog query costs it a millisecond), registers an array decoder for each in
 * `sql.options.parsers`, so `my_enum[]` arrives as an array instead of its text literal.
 */
import type { QueryRequest } from "../connection/requests/query_request.ts";
import { driverRowsRequest } from "../connection/requests/driver_queries.ts";
import type { TypeHandlers } from "../query/type_handlers.ts";
import { FIRST_USER_OID } from "../types/oids.ts";

// int8: OIDs are unsigned 32-bit, and int4 would turn those past 2^31 negative.
const QUERY = "select t.oid::int8, t.typarray::int8, t.typdelim::text from pg_catalog.pg_type t " +
  `where t.typarray <> 0 and t.oid >= ${FIRST_USER_OID}`;

/** Adds an entry to `sql.options.parsers` for each (element, array, delimiter) row. */
function register(rows: unknown[][], handlers: TypeHandlers): void {
  handlers.addArrayTypes(rows.map(([element, array, delimiter]) => ({
    element: Number(element),
    array: Number(array),
    delimiter: (delimiter as string) || ",",
  })));
}

/**
 * The catalog query as a request. Its decoders are registered the moment its answer is
 * complete, before the read loop reads on: a query written behind it on the same connection
 * already decodes with them, and one written before it that returns a user-defined type keeps
 * its rows until then (`typesDone`, see QueryRequest). A failure leaves the types to the next
 * connection; the queries around it run as they would without them.
 */
export function arrayTypesRequest(handlers: TypeHandlers): QueryRequest {
  let done!: () => void;
  const typesDone = new Promise<void>((resolve) => done = resolve);
  const req = driverRowsRequest(QUERY, [], {
    resolve: (rows) => {
      // Registering recompiles the tables, which reads the user's parsers (their `array` flag):
      // this runs in the read loop, so what a parser throws is reported, not let through.
      try {
        register(rows, handlers);
      } catch (e) {
        console.error("pgpipe: fetch_types could not register array types:", e);
      }
      done();
    },
    reject: () => done(),
  });
  req.typesDone = typesDone;
  return req;
}

/** Runs fixed, parameterless SQL (LISTEN, ROLLBACK, ...) on a connection or pool. */
import { QueryRequest } from "./query_request.ts";
import type { PipelineRequest } from "./request.ts";

/** Anything requests can be sent to. */
export interface Sink {
  /** Sends a request. */
  send(req: PipelineRequest): void;
}

/** Sends `text` with the simple protocol; resolves when the server answered, rejects on error. */
export function exec(sink: Sink, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    sink.send(
      new QueryRequest(
        { text, params: [], types: [], prepare: false, mode: "array", simple: true },
        { push: () => 0, length: 0, command: "", count: 0, columns: null, statement: null },
        { resolve: () => resolve(), reject },
      ),
    );
  });
}

/** The driver's own queries decode plainly, whatever transforms the user configured. */
const PLAIN = { bigint: false } as const;

/**
 * Runs one of the driver's own queries and resolves to its rows as arrays,
 * decoded plainly (no user transforms or parsers). Without parameters it goes
 * by the simple protocol (replication connections accept nothing else).
 */
export function driverRows(sink: Sink, text: string, params: string[] = []): Promise<unknown[][]> {
  return new Promise((resolve, reject) => {
    sink.send(driverRowsRequest(text, params, { resolve, reject }));
  });
}

/**
 * The request behind {@link driverRows}: `settle.resolve` gets the rows synchronously as the
 * answer completes, before the read loop reads on.
 */
export function driverRowsRequest(
  text: string,
  params: string[],
  settle: { resolve(rows: unknown[][]): void; reject(e: Error): void },
): QueryRequest {
  const rows: unknown[][] = [];
  return new QueryRequest(
    {
      text,
      params,
      types: params.map(() => 0),
      prepare: false,
      mode: "array",
      simple: params.length === 0,
      decode: PLAIN,
    },
    {
      push: (row) => rows.push(row as unknown[]),
      length: 0,
      command: "",
      count: 0,
      columns: null,
      statement: null,
    },
    { resolve: () => settle.resolve(rows), reject: (e) => settle.reject(e) },
  );
}

/** Runs fixed SQL with the simple protocol; resolves to its first row (text values), rejects if none. */
export async function firstRow(sink: Sink, text: string): Promise<unknown[]> {
  const rows = await driverRows(sink, text);
  if (rows.length === 0) throw new Error(`no row from: ${text}`);
  return rows[0];
}

/** Quotes an identifier (channel, savepoint) for splicing into SQL. */
export function quoteIdentifier(name: string): string {
  return '"' + name.replaceAll('"', '""') + '"';
}

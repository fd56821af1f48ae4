/**
 * What the two halves of the typed-SQL command share: the queries the source scanner found
 * (`FoundQuery`), and what describing one against the schema told (`QueryTypes`). The scanner and
 * the writer know nothing of PostgreSQL; the describer knows nothing of TypeScript sources.
 */

/** One tagged template whose text is known, as the scanner found it in a source file. */
export interface FoundQuery {
  /** The source file, as given on the command line (for messages). */
  file: string;
  /** 1-based line and column of the template's first character (the backtick). */
  line: number;
  column: number;
  /** The SQL as pgpipe would send it: interpolated values as `$1`…`$n`, static fragments inlined. */
  text: string;
  /**
   * For each character of `text`, the 0-based offset in the source file it came from, so a
   * server's error position (1-based, in characters of `text`) maps back to a source line.
   */
  sourceOffsets: readonly number[];
}

/** A column of a described query's rows, with its TypeScript type already decided. */
export interface ColumnType {
  /** The key the row has at run time (after the client's column-name `transform`). */
  name: string;
  /** TypeScript type text, without `| null` (for example `number`, `string[]`, `"a" | "b"`). */
  type: string;
  /** Whether the value can be null (proved non-null only as the nullability rules allow). */
  nullable: boolean;
}

/** The types of one query, or why it could not be described. */
export type QueryTypes =
  | {
    ok: true;
    /** The row's columns in order. */
    columns: ColumnType[];
    /** TypeScript type text accepted for each parameter `$1`…`$n`, in order. */
    params: string[];
  }
  | {
    ok: false;
    /** The server's (or the describer's) message. */
    message: string;
    /** The server's error position: 1-based character index into the query's `text`. */
    position?: number;
    /** SQLSTATE when the server sent one. */
    code?: string;
  };

/** Options that change what a row looks like at run time, so they change the written types. */
export interface TypegenOptions {
  /** The client's column-name transform, as `postgres({ transform: postgres.camel })` etc. */
  transform?: "camel" | "pascal" | "kebab";
  /** The client's bigint mode: `int8` as `bigint` (postgres.js's `types: { bigint: postgres.BigInt }`). */
  bigint?: boolean;
}

/** Where the schema comes from. Exactly one of the two. */
export type SchemaSource =
  | { migrations: string }
  | { database: string | undefined };

/** Describes queries against one schema; pipelined, never runs a user's statement. */
export interface Describer {
  /** The types of each text, in order; one failure never fails the others. */
  describe(texts: readonly string[]): Promise<QueryTypes[]>;
  /** Ends the client (and the in-process PGlite, when there is one). */
  close(): Promise<void>;
}

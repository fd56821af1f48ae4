/**
 * The per-client settings queries are built and decoded with: the `transform`
 * and `types` options. The decode half goes to the connections as
 * DecodeOptions; the query half (undefined substitute, helper name mapping,
 * custom serializers, `sql.typed`) is kept beside it, keyed by that same
 * DecodeOptions object, so a tag can find it from the pool or connection it
 * sends to. Both halves follow `sql.options.parsers` and `sql.options.serializers`
 * (type_handlers.ts).
 */
import type { Serializers } from "../types/encode.ts";
import type { DecodeOptions } from "../types/text_decoders.ts";
import { customTypes, type PostgresType, type Typed } from "./custom_types.ts";
import { normalizeTransform, type Transform } from "./transform.ts";
import { TypeHandlers } from "./type_handlers.ts";

/** What building and sending a query needs from the client's options. */
export interface QueryConfig {
  /** Sent instead of `undefined` values; undefined: they are errors. */
  undefinedValue: unknown;
  /** Maps names written by `sql(...)` helpers and `sql(name)`. */
  columnTo: ((name: string) => string) | undefined;
  /**
   * Custom parameter serializers by OID, or null (the fast path). Read at each query: a change
   * to `sql.options.serializers` replaces it.
   */
  serializers: Serializers | null;
  /** `sql.typed` (and `sql.types`) with the custom type helpers. */
  typed: Typed;
  /**
   * The `debug` option is set: every query captures its whole stack, and the
   * query details on its errors are enumerable.
   */
  debug: boolean;
  /** How this client's connections decode values (parsers, transforms), for `copyTo`. */
  decode: DecodeOptions;
  /** `sql.options.parsers` and `sql.options.serializers` (null for the defaults below). */
  handlers: TypeHandlers | null;
}

const configs = new WeakMap<DecodeOptions, QueryConfig>();

const defaults: QueryConfig = {
  undefinedValue: undefined,
  columnTo: undefined,
  serializers: null,
  typed: customTypes(undefined).typed,
  debug: false,
  decode: { bigint: false },
  handlers: null,
};

/**
 * The DecodeOptions for a client with these options (`transform` and `types` as the user gave
 * them: compiling them here checks them, in `postgres()`); its QueryConfig is remembered for
 * {@linkcode queryConfig}.
 */
export function clientDecode(
  options: {
    bigint: boolean;
    transform?: Transform;
    types?: Record<string, PostgresType>;
    debug?: boolean;
  },
): DecodeOptions {
  const transform = normalizeTransform(options.transform);
  const types = customTypes(options.types);
  const decode: DecodeOptions = { bigint: options.bigint };
  if (transform.columnFrom !== undefined) decode.column = transform.columnFrom;
  if (transform.valueFrom !== undefined) decode.value = transform.valueFrom;
  if (transform.rowFrom !== undefined) decode.row = transform.rowFrom;
  const config: QueryConfig = {
    undefinedValue: transform.undefined,
    columnTo: transform.columnTo,
    serializers: null,
    typed: types.typed,
    debug: options.debug === true,
    decode,
    handlers: null,
  };
  // Each change to the tables swaps in new maps: statements described with the old parsers map
  // see that it is no longer the connection's and describe themselves again (see Statement).
  config.handlers = new TypeHandlers(
    { bigint: options.bigint, parsers: types.parsers, serializers: types.serializers },
    {
      parsers: (map) => decode.parsers = map,
      serializers: (map) => config.serializers = map,
    },
  );
  configs.set(decode, config);
  return decode;
}

/** The QueryConfig of the client whose DecodeOptions these are (defaults when unknown). */
export function queryConfig(decode: DecodeOptions | undefined): QueryConfig {
  return (decode !== undefined && configs.get(decode)) || defaults;
}

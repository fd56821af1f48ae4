/**
 * Resolution: each setting from the first source that gives it. The precedence, as in libpq and
 * postgres.js: the options object, then the URL, then `PG*` environment variables, then defaults.
 * The sources are weighed here and nowhere else; keywords.ts says what each keyword is called in
 * each source and how its value is read.
 *
 * Everything is checked here, in `postgres()`, so no option value can throw later inside the pool
 * or the read loop.
 */
import type { FieldMap } from "../protocol/backend.ts";
import { socketPath, type SslMode } from "../connection/transport/transport.ts";
import { customTypes } from "../query/custom_types.ts";
import { normalizeTransform } from "../query/transform.ts";
import { type Notice, noticeOf } from "../errors.ts";
import { Coercion } from "./coercion.ts";
import { env, firstEnv } from "./environment.ts";
import {
  checkPort,
  type HostEntry,
  optionHosts,
  parsePortList,
  pickPort,
  plainHosts,
} from "./host_list.ts";
import { HOST_KEYWORDS, isKeyword, type Keyword, KEYWORDS, type Settings } from "./keywords.ts";
import type { HostTarget, Options, ResolvedOptions } from "./options.ts";
import { readPgpass } from "./pgpass.ts";
import { tlsSettings } from "./tls.ts";
import { type ParsedUrl, parseUrl, urlText } from "./url.ts";

/** Applies options, URL, environment and defaults. */
export function resolveOptions(url: string | undefined, options: Options = {}): ResolvedOptions {
  const parsed: ParsedUrl = url === undefined ? { hosts: [], query: new Map() } : parseUrl(url);
  const coercion = new Coercion();
  const entries = resolveHosts(options, parsed, coercion);
  const keywords = readKeywords(options, parsed, coercion);
  const { user, password } = keywords;
  const database = keywords.dbname ?? user; // libpq's default: the user's name
  const hosts: HostTarget[] = entries.map(({ host, port }) => ({
    host,
    port,
    // Read only if the server asks for a password, as libpq does; per host, as libpq does.
    password: password ?? (() => readPgpass({ host, port, database, user }) as Promise<string>),
  }));
  const tls = tlsSettings(keywords.sslmode, keywords.sslrootcert, keywords.sslnegotiation);
  const params = serverSettings(keywords, database, parsed, options.connection, coercion);
  checkHooks(options);
  const socket = bindSocket(options, hosts, database, user, tls.sslmode);
  const first = hosts[0];
  return {
    host: first.host,
    port: first.port,
    database,
    user,
    password: first.password,
    pass: password,
    ...(coercion.failure !== undefined ? { failure: coercion.failure } : {}),
    ...(socket !== undefined ? { socket } : {}),
    hosts,
    targetSessionAttrs: keywords.target_session_attrs,
    loadBalanceHosts: keywords.load_balance_hosts,
    protocolMinor: keywords.max_protocol_version,
    sslmode: tls.sslmode,
    ca: tls.ca,
    sslnegotiation: tls.sslnegotiation,
    max: keywords.max,
    idleTimeout: keywords.idle_timeout,
    maxLifetime: keywords.max_lifetime,
    fetchTypes: keywords.fetch_types,
    debug: typeof options.debug === "function" ? options.debug : undefined,
    debugStacks: options.debug !== undefined && options.debug !== false,
    queryTimeout: keywords.query_timeout,
    maxQueue: options.max_queue ?? 100_000,
    connectTimeout: keywords.connect_timeout,
    prepare: keywords.prepare,
    forcePrepare: keywords.prepare && keywords.force_prepare,
    maxPipeline: keywords.max_pipeline,
    maxPipelineBytes: options.max_pipeline_bytes ?? 16 * 1024 * 1024,
    maxStatements: options.max_statements ?? 1000,
    bigint: options.bigint ?? false,
    transform: normalizeTransform(options.transform),
    types: customTypes(options.types),
    params,
    onnotice: noticeHook(options.onnotice),
    onparameter: options.onparameter,
    onnotify: options.onnotify,
    publications: keywords.publications.list,
    publicationNames: keywords.publications.names,
    telemetry: options.telemetry,
  };
}

/**
 * Each keyword of KEYWORDS, in order, from the first source that gives it: the options object,
 * then the URL, then the environment, then its default.
 */
function readKeywords(options: Options, url: ParsedUrl, coercion: Coercion): Settings {
  const out: Record<string, unknown> = {};
  for (const [keyword, row] of Object.entries(KEYWORDS) as [string, Keyword<unknown>][]) {
    const option = fromOptions(options, row);
    if (option !== undefined && option !== null) {
      out[keyword] = row.parse(option, { keyword, text: false, coercion });
      continue;
    }
    const text = urlText(url, keyword) ?? firstEnv(row.env ?? []) ??
      (typeof row.default === "function" ? row.default() : row.default);
    out[keyword] = text === undefined
      ? undefined
      : row.parse(text, { keyword, text: true, coercion });
  }
  return out as Settings;
}

/** What the options object gives for a keyword (undefined and null: nothing). */
function fromOptions(options: Options, row: Keyword<unknown>): unknown {
  if (typeof row.option === "function") return row.option(options);
  return row.option === undefined ? undefined : options[row.option];
}

/**
 * The hosts to try and their ports. Hosts come from the first of: `path`,
 * `host`, the URL's `?host=`, the URL's authority, `PGHOST`, localhost. A
 * port list (`port` option, `?port=`) applies over every host; else a host's
 * own `:port`, then the URL's ports, `PGPORT`, 5432. A list holds one port
 * for all hosts or one per host.
 */
function resolveHosts(
  options: Options,
  parsed: ParsedUrl,
  co: Coercion,
): { host: string; port: number }[] {
  const q = parsed.query;
  const urlHosts = parsed.hosts.some((h) => h.host !== undefined) ? parsed.hosts : undefined;
  const pgHost = env(HOST_KEYWORDS.host.env);
  const path = co.optional(options.path);
  const host = options.host === undefined || options.host === null
    ? undefined
    : Array.isArray(options.host)
    ? options.host.map((h) => co.text(h))
    : co.text(options.host);
  const entries: HostEntry[] = path !== undefined
    ? [{ host: path }]
    : host !== undefined
    ? optionHosts(host)
    : q.get("host")
    ? plainHosts(q.get("host")!)
    : urlHosts ?? (pgHost ? plainHosts(pgHost) : [{}]);
  const n = entries.length;
  const explicit: (number | undefined)[] | undefined = options.port !== undefined
    ? (Array.isArray(options.port) ? options.port : [options.port])
    : q.get("port")
    ? parsePortList(q.get("port")!)
    : undefined;
  // The URL's ports also serve hosts given elsewhere (options.host with a URL's port).
  const urlPorts = entries !== urlHosts && parsed.hosts.some((h) => h.port !== undefined) &&
      (parsed.hosts.length === 1 || parsed.hosts.length === n)
    ? parsed.hosts.map((h) => h.port)
    : undefined;
  const pgPort = env(HOST_KEYWORDS.port.env);
  const envPorts = pgPort ? parsePortList(pgPort) : undefined;
  return entries.map((entry, i) => {
    let port = explicit !== undefined ? pickPort(explicit, i, n, "the port option") : undefined;
    port ??= entry.port;
    if (port === undefined && urlPorts !== undefined) port = pickPort(urlPorts, i, n, "the URL");
    if (port === undefined && envPorts !== undefined) port = pickPort(envPorts, i, n, "PGPORT");
    return {
      host: entry.host ?? HOST_KEYWORDS.host.default,
      port: port === undefined ? HOST_KEYWORDS.port.default : checkPort(port),
    };
  });
}

/**
 * The startup parameters: the driver's own, then every URL query key that is not a keyword
 * (postgres.js's rule: a server setting), then the `connection` option's, each over the last.
 */
function serverSettings(
  keywords: Settings,
  database: string,
  url: ParsedUrl,
  connection: Options["connection"],
  co: Coercion,
): Record<string, string> {
  const params: Record<string, string> = {
    user: keywords.user,
    database,
    application_name: keywords.application_name,
    client_encoding: "UTF8",
    DateStyle: "ISO, MDY",
  };
  for (const [key, value] of url.query) if (!isKeyword(key)) params[key] = value;
  for (const [key, value] of Object.entries(connection ?? {})) {
    const text = co.optional(value);
    if (text !== undefined) params[key] = text;
  }
  return params;
}

/** Checks the options taken as they are (callbacks and telemetry), so none can throw later. */
function checkHooks(options: Options): void {
  if (options.socket !== undefined && typeof options.socket !== "function") {
    throw new TypeError("the socket option must be a function returning a connected socket");
  }
  if (
    options.debug !== undefined && typeof options.debug !== "boolean" &&
    typeof options.debug !== "function"
  ) {
    throw new TypeError(`debug must be true, false or a function; got ${typeof options.debug}`);
  }
  const telemetry = options.telemetry;
  if (
    telemetry !== undefined && telemetry !== false &&
    (typeof telemetry !== "object" || telemetry === null)
  ) {
    throw new TypeError(
      `telemetry must be false or an object; got ${telemetry === null ? "null" : typeof telemetry}`,
    );
  }
}

/**
 * The user's `socket` function, called for a target with postgres.js's view of the
 * configuration (every host and port as arrays).
 */
function bindSocket(
  options: Options,
  hosts: HostTarget[],
  database: string,
  user: string,
  sslmode: SslMode,
): ResolvedOptions["socket"] {
  const userSocket = options.socket;
  if (userSocket === undefined) return undefined;
  const first = hosts[0];
  const info = {
    host: hosts.map((h) => h.host),
    port: hosts.map((h) => h.port),
    ...(first.host.startsWith("/") ? { path: socketPath(first.host, first.port) } : {}),
    database,
    user,
    ssl: sslmode,
  };
  return (target: { host: string; port: number }) => userSocket({ ...info, target });
}

/** Hands the user's `onnotice` (or console.log, postgres.js's default) the notice object. */
function noticeHook(onnotice: ((notice: Notice) => void) | undefined): (fields: FieldMap) => void {
  const hook = onnotice ?? ((notice: Notice) => console.log(notice));
  return (fields) => hook(noticeOf(fields));
}

/**
 * Resolution: each setting from the first source that gives it. The precedence, as in libpq and
 * postgres.js: the options object, then the URL, then the service file's section (service.ts),
 * then `PG*` environment variables, then defaults.
 * The sources are weighed here and nowhere else; keywords.ts says what each keyword is called in
 * each source and how its value is read.
 *
 * Everything is checked here, in `postgres()`, so no option value can throw later inside the pool
 * or the read loop.
 */
import type { FieldMap } from "../protocol/backend.ts";
import type { HostTarget } from "../connection/hosts.ts";
import { type Notice, noticeOf } from "../errors.ts";
import { Coercion } from "./coercion.ts";
import { firstEnv } from "./environment.ts";
import {
  checkPort,
  type HostEntry,
  optionHosts,
  parsePortList,
  pickPort,
  plainHosts,
} from "./host_list.ts";
import {
  HOST_KEYWORDS,
  isKeyword,
  isLibpqKeyword,
  type Keyword,
  KEYWORDS,
  type Settings,
} from "./keywords.ts";
import type { Options, ResolvedOptions } from "./options.ts";
import { readService } from "./service.ts";
import { isConninfo, parseConninfo } from "./conninfo.ts";
import { tlsSettings } from "./tls.ts";
import { type ParsedUrl, parseUrl, urlText } from "./url.ts";

/** The sources after the options object, in order, for one keyword: its text, if one gives it. */
interface TextSources {
  url: ParsedUrl;
  /**
   * The first of these `PG*` variables that is set. None is for a client over an embedded server
   * (PGlite): they describe a server on a network, and one set for the program's real database
   * must not refuse or redirect it.
   */
  env: (names: readonly string[]) => string | undefined;
  /** The service file's section, when a service is named. */
  service?: ReadonlyMap<string, string>;
}

/** Applies options, URL, service file, environment and defaults. */
export function resolveOptions(url: string | undefined, options: Options = {}): ResolvedOptions {
  const parsed: ParsedUrl = url === undefined
    ? { hosts: [], query: new Map() }
    : isConninfo(url)
    ? parseConninfo(url, isKeyword)
    : parseUrl(url);
  const coercion = new Coercion();
  const embedded = options.embedded !== undefined;
  const fromEnv = embedded ? () => undefined : firstEnv;
  const sources: TextSources = {
    url: parsed,
    env: fromEnv,
    // Over an embedded server no service file is read (a `service` option is refused there).
    service: embedded ? undefined : service(options, parsed, fromEnv, coercion),
  };
  const keywords = readKeywords(options, sources, coercion);
  const entries = resolveHosts(options, sources, keywords.hostaddr, coercion);
  const { user, password } = keywords;
  const database = keywords.dbname ?? user; // libpq's default: the user's name
  const passfile = keywords.passfile;
  const hosts: HostTarget[] = entries.map(({ host, port, address }) => ({
    host,
    port,
    ...(address !== undefined ? { address } : {}),
    // Read only if the server asks for a password, as libpq does; per host, as libpq does. The
    // reader loads then too: most clients never ask for it.
    password: password ??
      (() =>
        import("./pgpass.ts").then((m) =>
          m.readPgpass({ host, port, database, user }, passfile) as Promise<string>
        )),
  }));
  // An embedded server is not on a network: no TLS, so no certificate or key file is read (a mode
  // that demands TLS is refused by embeddedOptions, from the mode asked for).
  const tls = embedded
    ? {
      ...tlsSettings({
        ...keywords,
        sslmode: { mode: "disable" },
        sslrootcert: undefined,
        sslnegotiation: "postgres",
      }),
      sslmode: asked(keywords),
    }
    : tlsSettings(keywords);
  const params = serverSettings(keywords, database, parsed, options.connection, coercion);
  checkHooks(options);
  checkCombinations(keywords, tls.sslmode);
  const first = hosts[0];
  return {
    host: first.host,
    port: first.port,
    database,
    user,
    password: first.password,
    pass: password,
    ...(coercion.failure !== undefined ? { failure: coercion.failure } : {}),
    ...(options.socket !== undefined ? { socket: options.socket } : {}),
    hosts,
    targetSessionAttrs: keywords.target_session_attrs,
    loadBalanceHosts: keywords.load_balance_hosts,
    protocolMinor: keywords.max_protocol_version,
    protocolMinMinor: keywords.min_protocol_version,
    sslmode: tls.sslmode,
    ca: tls.ca,
    sslnegotiation: tls.sslnegotiation,
    tls,
    auth: {
      channelBinding: keywords.channel_binding,
      ...(keywords.require_auth !== undefined ? { requireAuth: keywords.require_auth } : {}),
      ...(keywords.scram_client_key !== undefined && keywords.scram_server_key !== undefined
        ? {
          scramKeys: {
            clientKey: keywords.scram_client_key,
            serverKey: keywords.scram_server_key,
          },
        }
        : {}),
    },
    keepalive: {
      enabled: keywords.keepalives,
      // With probes off the delay means nothing; given, it would take the connection to node:net.
      ...(keywords.keepalives && keywords.keepalives_idle
        ? { idleMs: keywords.keepalives_idle }
        : {}),
    },
    max: keywords.max,
    idleTimeout: keywords.idle_timeout,
    maxLifetime: keywords.max_lifetime,
    fetchTypes: keywords.fetch_types,
    debug: typeof options.debug === "function" ? options.debug : undefined,
    debugStacks: options.debug !== undefined && options.debug !== false,
    queryTimeout: keywords.query_timeout,
    maxQueue: keywords.max_queue,
    connectTimeout: keywords.connect_timeout,
    prepare: keywords.prepare,
    forcePrepare: keywords.force_prepare,
    maxPipeline: keywords.max_pipeline,
    maxPipelineBytes: keywords.max_pipeline_bytes,
    maxStatements: keywords.max_statements,
    bigint: keywords.bigint,
    transform: options.transform,
    types: options.types,
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
 * The service file's section the `service` keyword names (from the options, the URL or
 * `PGSERVICE`), or undefined when none is named.
 */
function service(
  options: Options,
  url: ParsedUrl,
  fromEnv: TextSources["env"],
  co: Coercion,
): ReadonlyMap<string, string> | undefined {
  const name = co.optional(options.service) ?? urlText(url, "service") ??
    fromEnv(KEYWORDS.service.env);
  if (name === undefined || name === "") return undefined;
  const file = co.optional(options.servicefile) ?? urlText(url, "servicefile") ??
    fromEnv(KEYWORDS.servicefile.env);
  return readService(name, file, isLibpqKeyword);
}

/** The sslmode the sources ask for (libpq's default: prefer). */
const asked = (k: Settings) => k.sslmode?.mode ?? "prefer";

/** Refuses keywords that each are valid but cannot hold together. */
function checkCombinations(k: Settings, sslmode: string): void {
  if (k.min_protocol_version > k.max_protocol_version) {
    throw new TypeError(
      `min_protocol_version 3.${k.min_protocol_version} is above max_protocol_version ` +
        `3.${k.max_protocol_version}`,
    );
  }
  if (k.channel_binding === "require" && sslmode === "disable") {
    throw new TypeError("channel_binding=require needs TLS, and sslmode is disable");
  }
  if (k.channel_binding === "require" && k.require_auth?.allowed.has("scram-sha-256") === false) {
    throw new TypeError(
      `channel_binding=require needs SCRAM, which require_auth=${k.require_auth.text} does not allow`,
    );
  }
  if ((k.scram_client_key === undefined) !== (k.scram_server_key === undefined)) {
    throw new TypeError("scram_client_key and scram_server_key must be given together");
  }
}

/**
 * Each keyword of KEYWORDS, in order, from the first source that gives it: the options object,
 * then the URL, then the service file's section, then the environment, then its default.
 */
function readKeywords(options: Options, sources: TextSources, coercion: Coercion): Settings {
  const out: Record<string, unknown> = {};
  // for...in, not for...of over Object.entries: this loop runs once per client, in the
  // interpreter, where taking each [key, row] pair apart through the iterator protocol made the
  // first resolveOptions() of a process ~1 ms slower (median of 15: 2.8 ms against 1.8). The
  // keys come in the same order.
  for (const keyword in KEYWORDS) {
    const row: Keyword<unknown> = KEYWORDS[keyword as keyof typeof KEYWORDS];
    const option = fromOptions(options, keyword, row);
    if (option !== undefined && option !== null) {
      out[keyword] = row.parse(option, { keyword, text: false, coercion });
      continue;
    }
    const text = urlText(sources.url, keyword) ?? sources.service?.get(keyword) ??
      sources.env(row.env ?? []) ??
      (typeof row.default === "function" ? row.default() : row.default);
    out[keyword] = text === undefined
      ? undefined
      : row.parse(text, { keyword, text: true, coercion });
  }
  return out as Settings;
}

/** What the options object gives for a keyword (undefined and null: nothing). */
function fromOptions(options: Options, keyword: string, row: Keyword<unknown>): unknown {
  if (typeof row.option === "function") return row.option(options);
  return (options as Record<string, unknown>)[row.option ?? keyword];
}

/**
 * The hosts to try, their ports and addresses. Hosts come from the first of: `path`, `host`, the
 * URL's `?host=`, the URL's authority, the service file, `PGHOST`, localhost. A port list (`port`
 * option, `?port=`) applies over every host; else a host's own `:port`, then the URL's ports,
 * the service file's, `PGPORT`, 5432. A list holds one port for all hosts or one per host.
 * `hostaddr` gives one address per host; with no host given, each address is its own host.
 */
function resolveHosts(
  options: Options,
  sources: TextSources,
  hostaddr: string[] | undefined,
  co: Coercion,
): { host: string; port: number; address?: string }[] {
  const { url: parsed, service } = sources;
  const q = parsed.query;
  const urlHosts = parsed.hosts.some((h) => h.host !== undefined) ? parsed.hosts : undefined;
  const listed = service?.get("host") ?? sources.env([HOST_KEYWORDS.host.env]);
  const path = co.optional(options.path);
  const host = options.host === undefined || options.host === null
    ? undefined
    : Array.isArray(options.host)
    ? options.host.map((h) => co.text(h))
    : co.text(options.host);
  const given: HostEntry[] | undefined = path !== undefined
    ? [{ host: path }]
    : host !== undefined
    ? optionHosts(host)
    : q.get("host")
    ? plainHosts(q.get("host")!)
    : urlHosts ?? (listed ? plainHosts(listed) : undefined);
  // libpq: addresses alone name the hosts; else there is one address per host.
  const entries: HostEntry[] = given ??
    (hostaddr !== undefined ? hostaddr.map((a) => ({ host: a || undefined })) : [{}]);
  const n = entries.length;
  if (hostaddr !== undefined && hostaddr.length !== n) {
    throw new TypeError(`hostaddr gives ${hostaddr.length} addresses for ${n} hosts`);
  }
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
  const portText = service?.get("port") ?? sources.env([HOST_KEYWORDS.port.env]);
  const textPorts = portText ? parsePortList(portText) : undefined;
  return entries.map((entry, i) => {
    let port = explicit !== undefined ? pickPort(explicit, i, n, "the port option") : undefined;
    port ??= entry.port;
    if (port === undefined && urlPorts !== undefined) port = pickPort(urlPorts, i, n, "the URL");
    if (port === undefined && textPorts !== undefined) {
      port = pickPort(textPorts, i, n, service?.has("port") ? "the service file" : "PGPORT");
    }
    const address = hostaddr?.[i] || undefined;
    return {
      host: entry.host ?? HOST_KEYWORDS.host.default,
      port: port === undefined ? HOST_KEYWORDS.port.default : checkPort(port),
      ...(address !== undefined ? { address } : {}),
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
    application_name: keywords.application_name ?? keywords.fallback_application_name ?? "pgpipe",
    client_encoding: "UTF8",
    DateStyle: "ISO, MDY",
    // libpq's `options`: the server's command-line options, its own startup parameter.
    ...(keywords.options !== undefined && keywords.options !== ""
      ? { options: keywords.options }
      : {}),
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

/** Hands the user's `onnotice` (or console.log, postgres.js's default) the notice object. */
function noticeHook(onnotice: ((notice: Notice) => void) | undefined): (fields: FieldMap) => void {
  const hook = onnotice ?? ((notice: Notice) => console.log(notice));
  return (fields) => hook(noticeOf(fields));
}

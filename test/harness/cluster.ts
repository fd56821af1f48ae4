// Starts a throwaway PostgreSQL cluster (initdb + pg_ctl) for the test suite.
// Everything lives in one temp dir that stop() deletes; every external command is time-bounded.
import { join } from "node:path";
import postgres, { type Sql } from "../../mod.ts";
import { makeTestCerts } from "./cluster_certs.ts";
import { findPgBin, pgBin, serverUser } from "./server_bin.ts";

export { findPgBin, serverUser };

export interface TestUser {
  user: string;
  password: string;
}

export interface ClusterInfo {
  host: string;
  port: number;
  socketDir: string;
  database: string;
  ssl: boolean;
  caCertPath?: string;
  caCert?: string;
  /** The folder of the TLS cluster's certificates (server.crt, server.key: what a pooler may reuse). */
  certDir?: string;
  otherCaCert?: string;
  /**
   * Client certificates the server's CA signed (TLS clusters): for `users.cert` (pg_hba `cert`),
   * for `users.certfull` (SCRAM with `clientcert=verify-full`), and one whose CN names no user.
   */
  clientCerts?: Record<"cert" | "certfull" | "nobody", { certPath: string; keyPath: string }>;
  users: {
    trust: TestUser;
    password: TestUser;
    md5: TestUser;
    scram: TestUser;
    sslonly: TestUser;
    cert: TestUser;
    certfull: TestUser;
  };
  version: number;
}

export interface Cluster extends ClusterInfo {
  dataDir: string;
  /** The folder of the server binaries it runs (a replica of it uses the same). */
  bin: string;
  /** Stops and deletes the cluster. */
  stop(): Promise<void>;
  /** Stops the server (fast shutdown) but keeps the data, to simulate an outage. */
  halt(): Promise<void>;
  /** Starts a halted server again on the same port. */
  resume(): Promise<void>;
}

interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  timeoutMs?: number;
  /** initdb/postgres refuse to run as root, so when root run via `runuser -u <serverUser()>`. */
  asServerUser?: boolean;
}

/** Whether we run as root (then servers run as `serverUser()`). */
export const isRoot = (): boolean => Deno.uid() === 0;

/** Runs a command with a deadline; resolves to stdout, throws with stderr on failure. */
export async function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<string> {
  const asPg = opts.asServerUser && isRoot();
  // Drop inherited PG* variables so a developer's PGHOST/PGSSLMODE cannot redirect the harness.
  const env = Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([k]) => !k.startsWith("PG")),
  );
  const child = new Deno.Command(asPg ? "runuser" : cmd, {
    args: asPg ? ["-u", serverUser(), "--", cmd, ...args] : args,
    cwd: opts.cwd,
    clearEnv: true,
    env: { ...env, ...opts.env },
    stdin: opts.stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timeoutMs = opts.timeoutMs ?? 30_000;
  let timedOut = false;
  const kill = (sig: Deno.Signal) => {
    try {
      child.kill(sig);
    } catch { /* already gone */ }
  };
  // SIGTERM first because runuser forwards it to its child; SIGKILL if that is ignored.
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    kill("SIGTERM");
    killTimer = setTimeout(() => kill("SIGKILL"), 5_000);
  }, timeoutMs);
  try {
    if (opts.stdin !== undefined) {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(opts.stdin));
      await w.close();
    }
    const out = await child.output();
    const dec = new TextDecoder();
    const what = `${cmd} ${args.join(" ")}`;
    if (timedOut) throw new Error(`${what}: timed out after ${timeoutMs} ms`);
    if (!out.success) {
      const err = dec.decode(out.stderr).trim() || dec.decode(out.stdout).trim();
      throw new Error(`${what}: exit code ${out.code}: ${err}`);
    }
    return dec.decode(out.stdout);
  } finally {
    clearTimeout(timer);
    clearTimeout(killTimer);
  }
}

function randomHex(bytes: number): string {
  const buf = crypto.getRandomValues(new Uint8Array(bytes));
  return [...buf].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** A free TCP port on 127.0.0.1 (bind to 0, read, close; racy but good enough with retries). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The client certificates made for a TLS cluster: file stem and the CN (the user) it names. */
const CLIENT_CERTS = {
  cert: "pgpipe_cert",
  certfull: "pgpipe_certfull",
  nobody: "pgpipe_nobody",
} as const;

/**
 * Writes ca.crt, server.crt, server.key, other-ca.crt and a client certificate and key per
 * CLIENT_CERTS (client-<name>.crt/.key) into dir.
 */
async function writeCerts(dir: string): Promise<void> {
  const certs = await makeTestCerts(CLIENT_CERTS);
  // The server refuses a key file readable by group/others; libpq's rule for a client key,
  // which pgpipe keeps, is the same.
  const key = { mode: 0o600 };
  await Deno.writeTextFile(join(dir, "ca.crt"), certs.ca);
  await Deno.writeTextFile(join(dir, "other-ca.crt"), certs.otherCa);
  await Deno.writeTextFile(join(dir, "server.crt"), certs.serverCert);
  await Deno.writeTextFile(join(dir, "server.key"), certs.serverKey, key);
  for (const [name, client] of Object.entries(certs.clients)) {
    await Deno.writeTextFile(join(dir, `client-${name}.crt`), client.cert);
    await Deno.writeTextFile(join(dir, `client-${name}.key`), client.key, key);
  }
}

const USER_NAMES = {
  trust: "pgpipe_trust",
  password: "pgpipe_password",
  md5: "pgpipe_md5",
  scram: "pgpipe_scram",
  sslonly: "pgpipe_sslonly",
  cert: CLIENT_CERTS.cert,
  certfull: CLIENT_CERTS.certfull,
} as const;

type Users = ClusterInfo["users"];

// Passwords carry a colon and a non-ASCII char (precomposed é) to exercise encoding paths.
function makeUsers(): Users {
  const mk = (user: string): TestUser => ({ user, password: `pw:\u00e9-${randomHex(6)}` });
  return {
    trust: mk(USER_NAMES.trust),
    password: mk(USER_NAMES.password),
    md5: mk(USER_NAMES.md5),
    scram: mk(USER_NAMES.scram),
    sslonly: mk(USER_NAMES.sslonly),
    cert: mk(USER_NAMES.cert),
    certfull: mk(USER_NAMES.certfull),
  };
}

const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;

function setupSql(u: Users): string {
  const role = (t: TestUser, extra: string) =>
    `CREATE ROLE ${t.user} LOGIN ${extra} PASSWORD ${lit(t.password)};`;
  return [
    // PG15 no longer lets PUBLIC create in schema public; tests create tables as any user.
    "GRANT ALL ON SCHEMA public TO PUBLIC;",
    // PostgreSQL 13 still stores md5 by default; every version stores SCRAM unless told.
    "SET password_encryption = 'scram-sha-256';",
    // Superuser so tests can pg_terminate_backend() and the like.
    role(u.trust, "SUPERUSER"),
    role(u.password, "CREATEDB"),
    "SET password_encryption = 'md5';", // stored as md5 so the md5 method is really exercised
    role(u.md5, "CREATEDB"),
    "SET password_encryption = 'scram-sha-256';",
    role(u.scram, "CREATEDB"),
    role(u.sslonly, "CREATEDB"),
    role(u.cert, "CREATEDB"),
    role(u.certfull, "CREATEDB"),
  ].join("\n");
}

/** pg_hba.conf; first match wins, so the per-user lines precede the catch-all trust. */
function hbaConf(ssl: boolean, replication: boolean): string {
  const lines = ["# written by the pgpipe test harness"];
  if (replication) {
    // pg_basebackup and the standby's WAL receiver connect as postgres to the pseudo-database.
    lines.push("local replication postgres trust", "host replication postgres 127.0.0.1/32 trust");
  }
  const add = (type: string, user: string, method: string) => {
    const nets = type === "local" ? [""] : ["127.0.0.1/32 ", "::1/128 "];
    for (const net of nets) lines.push(`${type} all ${user} ${net}${method}`);
  };
  add("local", USER_NAMES.sslonly, "reject");
  add("hostnossl", USER_NAMES.sslonly, "reject");
  if (ssl) add("hostssl", USER_NAMES.sslonly, "scram-sha-256");
  // Client certificates: the certificate alone (its CN is the user), or SCRAM and a certificate
  // whose CN is the user (clientcert=verify-full).
  for (const user of [USER_NAMES.cert, USER_NAMES.certfull]) {
    add("local", user, "reject");
    add("hostnossl", user, "reject");
  }
  if (ssl) {
    add("hostssl", USER_NAMES.cert, "cert");
    add("hostssl", USER_NAMES.certfull, "scram-sha-256 clientcert=verify-full");
  }
  const methods: [string, string][] = [
    [USER_NAMES.password, "password"],
    [USER_NAMES.md5, "md5"],
    [USER_NAMES.scram, "scram-sha-256"],
    ["all", "trust"],
  ];
  for (const [user, method] of methods) {
    add("local", user, method);
    add("host", user, method);
  }
  return lines.join("\n") + "\n";
}

function serverConf(
  port: number,
  socketDir: string,
  ssl: boolean,
  certDir: string,
  replication: boolean,
): string {
  const conf: Record<string, string | number> = {
    listen_addresses: "127.0.0.1",
    port,
    unix_socket_directories: socketDir,
    max_connections: 100,
    // Durability is pointless for a throwaway cluster; skipping it makes tests faster.
    fsync: "off",
    synchronous_commit: "off",
    full_page_writes: "off",
    ssl: ssl ? "on" : "off",
    // Logical decoding for sql.subscribe(); a superset of what the replica tests need.
    wal_level: "logical",
    max_wal_senders: 10,
    max_replication_slots: 10,
    // Two-phase commit (sql.prepare inside sql.begin) needs slots for prepared transactions.
    max_prepared_transactions: 10,
  };
  if (replication) conf.hot_standby = "on";
  if (ssl) {
    conf.ssl_cert_file = join(certDir, "server.crt");
    conf.ssl_key_file = join(certDir, "server.key");
    // The CA that signs client certificates (pg_hba `cert`, `clientcert=`).
    conf.ssl_ca_file = join(certDir, "ca.crt");
  }
  const lines = Object.entries(conf).map(([k, v]) =>
    `${k} = ${typeof v === "number" ? v : lit(v)}`
  );
  return "\n# pgpipe test harness\n" + lines.join("\n") + "\n";
}

export async function logTail(path: string): Promise<string> {
  try {
    return (await Deno.readTextFile(path)).trim().split("\n").slice(-15).join("\n");
  } catch {
    return "(no server log)";
  }
}

/**
 * The server's environment. gettext reads LANGUAGE under any message locale but C, so a session
 * that sets lc_messages to C.UTF-8 (a superuser may) reads the server's German translations
 * without a German OS locale installed; lc_messages stays C otherwise (initdb --locale=C).
 */
const SERVER_ENV = { LANGUAGE: "de" };

/**
 * Starts the server in `dataDir` on a free port, appending `conf(port)` to postgresql.conf.
 * Another process may grab the port between freePort() and bind, so it retries on EADDRINUSE.
 * Returns the port.
 */
export async function startOnFreePort(
  pgCtl: string,
  dataDir: string,
  logFile: string,
  cwd: string,
  conf: (port: number) => string,
): Promise<number> {
  for (let attempt = 1;; attempt++) {
    const port = freePort();
    await Deno.writeTextFile(join(dataDir, "postgresql.conf"), conf(port), { append: true });
    try {
      // -w returns once the server accepts connections (read-only ones, for a standby).
      await run(pgCtl, ["-D", dataDir, "-l", logFile, "-w", "-t", "60", "start"], {
        asServerUser: true,
        cwd,
        timeoutMs: 70_000,
        env: SERVER_ENV,
      });
      return port;
    } catch (e) {
      const log = await logTail(logFile);
      if (attempt < 3 && /already in use/.test(log)) continue;
      throw new Error(`${(e as Error).message}\n--- server log ---\n${log}`);
    }
  }
}

/** Last resort when pg_ctl cannot stop the server: kill the postmaster from its pid file. */
export async function killPostmaster(dataDir: string): Promise<void> {
  try {
    const pid = parseInt((await Deno.readTextFile(join(dataDir, "postmaster.pid"))).split("\n")[0]);
    if (pid > 0) Deno.kill(pid, "SIGKILL");
  } catch {
    // not running
  }
}

/**
 * Runs `fn` with a client connected to the server on `port` as its superuser `postgres` (trust,
 * plain TCP): pgpipe itself, so setting a cluster up needs no psql (the npm builds have none).
 */
export async function asSuperuser<T>(port: number, fn: (sql: Sql) => Promise<T>): Promise<T> {
  const sql = postgres({
    host: "127.0.0.1",
    port,
    user: "postgres",
    database: "postgres",
    ssl: false,
    max: 1,
    connect_timeout: 30,
    onnotice: () => {},
  });
  try {
    return await fn(sql);
  } finally {
    await sql.end();
  }
}

/** What kind of cluster `startCluster` starts. */
export interface ClusterOptions {
  /** TLS on (a test CA, a server certificate for localhost and 127.0.0.1). Default false. */
  ssl?: boolean;
  /** Names its temp folder (`pgpipe-<name>-`). Default "tls" or "plain". */
  name?: string;
  /** Lets a replica stream from it (see replica.ts). Default false. */
  replication?: boolean;
  /**
   * The server version: a major ("18", installed from npm on first use, see server_bin.ts),
   * "installed", or a folder of server binaries. Default: the version the runner chose
   * (`deno task test --pg=N`).
   */
  pg?: string;
}

/** Starts a throwaway cluster: users for every auth method, TLS if asked, on a free port. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const bin = await pgBin(opts.pg);
  const ssl = opts.ssl ?? false;
  const replication = opts.replication ?? false;
  const label = opts.name ?? (ssl ? "tls" : "plain");
  const tmp = await Deno.makeTempDir({ prefix: `pgpipe-${label}-` });
  const dataDir = join(tmp, "data");
  const certDir = join(tmp, "certs");
  const logFile = join(tmp, "postgres.log");
  const pgCtl = join(bin, "pg_ctl");
  const asServer = { asServerUser: true, cwd: tmp };

  const stop = async () => {
    try {
      await run(pgCtl, ["-D", dataDir, "-m", "immediate", "-w", "-t", "15", "stop"], {
        ...asServer,
        timeoutMs: 20_000,
      });
    } catch {
      await killPostmaster(dataDir);
    }
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
  };
  let stopping: Promise<void> | undefined;
  const stopOnce = () => (stopping ??= stop());

  try {
    if (ssl) {
      await Deno.mkdir(certDir);
      await writeCerts(certDir);
    }
    // The server runs as serverUser() when we are root, so it must own everything in tmp.
    if (isRoot()) await run("chown", ["-R", `${serverUser()}:`, tmp]);
    const initArgs = ["-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"];
    await run(join(bin, "initdb"), [...initArgs, "--locale=C"], { ...asServer, timeoutMs: 60_000 });
    // Overwriting/appending keeps the files' owner (the server's user) and mode (0600).
    await Deno.writeTextFile(join(dataDir, "pg_hba.conf"), hbaConf(ssl, replication));

    // Appended: the last setting wins.
    const port = await startOnFreePort(
      pgCtl,
      dataDir,
      logFile,
      tmp,
      (p) => serverConf(p, tmp, ssl, certDir, replication),
    );

    const users = makeUsers();
    const version = await asSuperuser(port, async (sql) => {
      await sql.unsafe(setupSql(users));
      const [{ v }] = await sql`select current_setting('server_version_num')::int as v`;
      return v as number;
    });

    const info: ClusterInfo = {
      host: "127.0.0.1",
      port,
      socketDir: tmp,
      database: "postgres",
      ssl,
      users,
      version,
    };
    if (ssl) {
      info.caCertPath = join(certDir, "ca.crt");
      info.certDir = certDir;
      info.caCert = await Deno.readTextFile(info.caCertPath);
      info.otherCaCert = await Deno.readTextFile(join(certDir, "other-ca.crt"));
      info.clientCerts = Object.fromEntries(
        Object.keys(CLIENT_CERTS).map((name) => [name, {
          certPath: join(certDir, `client-${name}.crt`),
          keyPath: join(certDir, `client-${name}.key`),
        }]),
      ) as ClusterInfo["clientCerts"];
    }
    const halt = async () => {
      await run(pgCtl, ["-D", dataDir, "-m", "fast", "-w", "-t", "30", "stop"], {
        ...asServer,
        timeoutMs: 35_000,
      });
    };
    const resume = async () => {
      await run(pgCtl, ["-D", dataDir, "-l", logFile, "-w", "-t", "60", "start"], {
        ...asServer,
        timeoutMs: 70_000,
        env: SERVER_ENV,
      });
    };
    return { ...info, dataDir, bin, stop: stopOnce, halt, resume };
  } catch (e) {
    await stopOnce();
    throw e;
  }
}

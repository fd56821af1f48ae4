// PgBouncer (Debian's `pgbouncer` package) in front of a test cluster, for the tests that check
// the driver through a transaction-mode pooler. It runs in the foreground as our child (as the
// `postgres` OS user when we are root: PgBouncer refuses to run as root), from a generated ini
// in a temp dir that stop() deletes.
import { join } from "node:path";
import { freePort, isRoot, run, serverUser } from "./cluster.ts";
import { isFile } from "./server_bin.ts";
import { poll, within } from "./wait.ts";

export interface Bouncer {
  host: string;
  port: number;
  /** Stops PgBouncer and deletes its directory. */
  stop(): Promise<void>;
  /** `stop()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The pgbouncer binary: PATH, then the Debian location; null when not installed. */
export function findPgbouncer(): string | null {
  const dirs = [...(Deno.env.get("PATH") ?? "").split(":"), "/usr/sbin", "/usr/bin"];
  for (const dir of dirs) {
    if (dir && isFile(join(dir, "pgbouncer"))) return join(dir, "pgbouncer");
  }
  return null;
}

export interface BouncerOptions {
  /** The server: host (or socket directory) and port. */
  server: { host: string; port: number };
  /** Users allowed in (auth_type trust still requires them in the auth file). */
  users: string[];
  /** Server connections per database/user pair. Default 4. */
  poolSize?: number;
  /**
   * Clients must use TLS with this certificate and key (files PgBouncer can read), as a managed
   * pooler does (Supabase's, Neon's); PgBouncer terminates TLS, so it offers no SCRAM-PLUS.
   */
  tls?: { certFile: string; keyFile: string };
  /**
   * Clients authenticate with SCRAM-SHA-256 against these passwords (PgBouncer uses them to log in
   * to the server too); default: trust.
   */
  passwords?: Record<string, string>;
}

const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;

/** Starts PgBouncer in transaction mode on a free 127.0.0.1 port; resolves once it accepts. */
export async function startPgbouncer(opts: BouncerOptions): Promise<Bouncer> {
  const bin = findPgbouncer();
  if (!bin) throw new Error("pgbouncer not found (Debian: apt-get install pgbouncer)");
  const tmp = await Deno.makeTempDir({ prefix: "pgpipe-pgbouncer-" });
  const port = freePort();
  const ini = [
    "[databases]",
    `* = host=${opts.server.host} port=${opts.server.port}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    `auth_type = ${opts.passwords ? "scram-sha-256" : "trust"}`,
    ...(opts.tls
      ? [
        "client_tls_sslmode = require",
        `client_tls_cert_file = ${opts.tls.certFile}`,
        `client_tls_key_file = ${opts.tls.keyFile}`,
      ]
      : []),
    `auth_file = ${join(tmp, "userlist.txt")}`,
    "pool_mode = transaction",
    `default_pool_size = ${opts.poolSize ?? 4}`,
    "max_client_conn = 200",
    // pgpipe's startup sends user, database, application_name, client_encoding and DateStyle,
    // which PgBouncer tracks itself; other drivers' extras are ignored rather than refused.
    "ignore_startup_parameters = extra_float_digits",
    `logfile = ${join(tmp, "pgbouncer.log")}`,
    `pidfile = ${join(tmp, "pgbouncer.pid")}`,
    "",
  ].join("\n");
  await Deno.writeTextFile(join(tmp, "pgbouncer.ini"), ini);
  await Deno.writeTextFile(
    join(tmp, "userlist.txt"),
    opts.users.map((u) => `${quote(u)} ${quote(opts.passwords?.[u] ?? "")}`).join("\n") + "\n",
  );
  if (isRoot()) await run("chown", ["-R", `${serverUser()}:`, tmp]);

  const asPg = isRoot();
  const args = [join(tmp, "pgbouncer.ini")];
  const child = new Deno.Command(asPg ? "runuser" : bin, {
    args: asPg ? ["-u", serverUser(), "--", bin, ...args] : args,
    cwd: tmp,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  const exited = child.status;
  let gone = false;
  exited.then(() => gone = true);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    stopping ??= (async () => {
      const kill = (sig: Deno.Signal) => {
        try {
          child.kill(sig);
        } catch { /* already gone */ }
      };
      // Signal PgBouncer itself (SIGTERM: fast exit): runuser, signalled, would wait 2 s more.
      let pid = 0;
      try {
        pid = parseInt(await Deno.readTextFile(join(tmp, "pgbouncer.pid")), 10) || 0;
      } catch { /* not written */ }
      const signal = (sig: Deno.Signal) => {
        if (gone) return;
        try {
          if (pid > 0) Deno.kill(pid, sig);
        } catch { /* already gone */ }
        kill(sig);
      };
      if (pid > 0 && !gone) {
        try {
          Deno.kill(pid, "SIGTERM");
        } catch {
          kill("SIGTERM");
        }
      } else kill("SIGTERM");
      if (await within(exited, 5_000, "pgbouncer's exit").then(() => false, () => true)) {
        signal("SIGKILL");
        await exited;
      }
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    })();

  try {
    const accepting = await poll(
      async () => {
        if (gone) return "gone";
        try {
          (await Deno.connect({ hostname: "127.0.0.1", port })).close();
          return "accepting";
        } catch {
          return null; // not listening yet
        }
      },
      10_000,
      50,
    );
    if (accepting !== "accepting") {
      let log = "";
      try {
        log = await Deno.readTextFile(join(tmp, "pgbouncer.log"));
      } catch { /* not written yet */ }
      throw new Error(
        `pgbouncer did not start on port ${port}${gone ? " (it exited)" : ""}\n${log}`,
      );
    }
    return { host: "127.0.0.1", port, stop, [Symbol.asyncDispose]: stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

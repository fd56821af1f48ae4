// A streaming replica of a throwaway cluster: pg_basebackup -R from the primary (started with
// `startCluster({ replication: true })`), on its own port and socket directory. Everything lives
// in one temp dir that stop() deletes; every external command is time-bounded.
import { join } from "node:path";
import {
  type Cluster,
  findPgBin,
  isRoot,
  killPostmaster,
  run,
  startOnFreePort,
} from "./cluster.ts";

export interface Replica {
  host: string;
  port: number;
  socketDir: string;
  dataDir: string;
  /** Promotes the standby to a primary and waits until it accepts writes. */
  promote(): Promise<void>;
  /** Stops and deletes the replica. */
  stop(): Promise<void>;
}

const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;

/** Clones `primary` with pg_basebackup and starts it as a hot standby streaming from it. */
export async function startReplica(primary: Cluster): Promise<Replica> {
  const bin = findPgBin();
  if (!bin) throw new Error("PostgreSQL server binaries (pg_basebackup, pg_ctl) not found");
  const tmp = await Deno.makeTempDir({ prefix: "pgpipe-replica-" });
  const dataDir = join(tmp, "data");
  const logFile = join(tmp, "postgres.log");
  const pgCtl = join(bin, "pg_ctl");
  const asServer = { asServerUser: true, cwd: tmp };

  let stopping: Promise<void> | undefined;
  const stop = () =>
    stopping ??= (async () => {
      try {
        await run(pgCtl, ["-D", dataDir, "-m", "immediate", "-w", "-t", "15", "stop"], {
          ...asServer,
          timeoutMs: 20_000,
        });
      } catch {
        await killPostmaster(dataDir);
      }
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    })();

  try {
    if (isRoot()) await run("chown", ["-R", "postgres:", tmp]);
    // -R writes standby.signal and primary_conninfo; -c fast: no wait for a spread checkpoint.
    await run(join(bin, "pg_basebackup"), [
      ...["-D", dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync"],
      ...["-h", primary.socketDir, "-p", `${primary.port}`, "-U", "postgres"],
    ], { ...asServer, timeoutMs: 60_000 });
    // Appended after the primary's settings (copied by the backup): the last setting wins.
    const port = await startOnFreePort(
      pgCtl,
      dataDir,
      logFile,
      tmp,
      (p) =>
        `\n# pgpipe test replica\nport = ${p}\n` +
        `unix_socket_directories = ${lit(tmp)}\nhot_standby = on\n`,
    );
    const promote = async () => {
      await run(pgCtl, ["-D", dataDir, "-w", "-t", "30", "promote"], {
        ...asServer,
        timeoutMs: 35_000,
      });
    };
    return { host: "127.0.0.1", port, socketDir: tmp, dataDir, promote, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

// A streaming replica of a throwaway cluster (started with `startCluster({ replication: true })`),
// with the primary's binaries, on its own port and socket directory: pg_basebackup -R where that
// version has it, else the same by hand (the npm builds carry only the server). Everything lives
// in one temp dir that stop() deletes; every external command is time-bounded.
import { join } from "node:path";
import {
  asSuperuser,
  type Cluster,
  isRoot,
  killPostmaster,
  run,
  serverUser,
  startOnFreePort,
} from "./cluster.ts";
import { clientTool } from "./server_bin.ts";

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
  const bin = primary.bin;
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
    if (isRoot()) await run("chown", ["-R", `${serverUser()}:`, tmp]);
    const basebackup = join(bin, "pg_basebackup");
    if (clientTool(bin, "pg_basebackup") === basebackup) {
      // -R writes standby.signal and primary_conninfo; -c fast: no wait for a spread checkpoint.
      await run(basebackup, [
        ...["-D", dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync"],
        ...["-h", primary.socketDir, "-p", `${primary.port}`, "-U", "postgres"],
      ], { ...asServer, timeoutMs: 60_000 });
    } else {
      await copyBackup(primary, dataDir);
    }
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

/**
 * What `pg_basebackup -R` does, without it: a non-exclusive base backup (started and stopped in
 * one session, the data folder copied in between), its backup_label, and the standby settings.
 * The standby streams the WAL it needs from the primary.
 */
async function copyBackup(primary: Cluster, dataDir: string): Promise<void> {
  const [start, stop] = primary.version >= 150000
    ? ["pg_backup_start('pgpipe replica', true)", "pg_backup_stop()"]
    : ["pg_start_backup('pgpipe replica', true, false)", "pg_stop_backup(false)"];
  const label = await asSuperuser(primary.port, async (sql) => {
    // max 1: one connection, so the backup starts and stops in the same session.
    await sql.unsafe(`select ${start}`);
    await copyTree(primary.dataDir, dataDir);
    const [{ labelfile }] = await sql.unsafe(`select labelfile from ${stop}`);
    return String(labelfile);
  });
  if (!label.startsWith("START WAL LOCATION")) throw new Error(`no backup label: ${label}`);
  // Not part of a backup: the primary's pid file and its replication slots.
  for (const name of ["postmaster.pid", "postmaster.opts"]) {
    await Deno.remove(join(dataDir, name)).catch(() => {});
  }
  for await (const slot of Deno.readDir(join(dataDir, "pg_replslot"))) {
    await Deno.remove(join(dataDir, "pg_replslot", slot.name), { recursive: true });
  }
  await Deno.writeTextFile(join(dataDir, "backup_label"), label);
  await Deno.writeTextFile(join(dataDir, "standby.signal"), "");
  const conninfo = `host=${primary.socketDir} port=${primary.port} user=postgres`;
  await Deno.writeTextFile(
    join(dataDir, "postgresql.auto.conf"),
    `primary_conninfo = ${lit(conninfo)}\n`,
    { append: true },
  );
  if (isRoot()) await run("chown", ["-R", `${serverUser()}:`, dataDir]);
}

/**
 * Copies a running server's data folder (what `cp -a` would, without needing it): folders and
 * files with their modes; a file the server removed meanwhile is skipped (the WAL replay of a
 * base backup makes up for what changed during the copy).
 */
async function copyTree(from: string, to: string): Promise<void> {
  const { mode } = await Deno.stat(from);
  await Deno.mkdir(to, { mode: mode ?? 0o700 });
  for await (const entry of Deno.readDir(from)) {
    const [src, dst] = [join(from, entry.name), join(to, entry.name)];
    try {
      if (entry.isDirectory) await copyTree(src, dst);
      else if (entry.isSymlink) await Deno.symlink(await Deno.readLink(src), dst);
      else {
        await Deno.copyFile(src, dst);
        const stat = await Deno.stat(src);
        if (stat.mode !== null) await Deno.chmod(dst, stat.mode & 0o7777);
      }
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
}

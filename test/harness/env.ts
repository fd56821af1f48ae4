// How test files learn about the clusters that test/run.ts started: the runner passes their
// ClusterInfo as JSON in PGPIPE_TEST_CLUSTERS = { "tls"?: ClusterInfo, "plain"?: ClusterInfo }.
import type { ClusterInfo } from "./cluster.ts";
import { onPglite, PGLITE_URL } from "./pglite_mode.ts";

interface Clusters {
  tls?: ClusterInfo;
  plain?: ClusterInfo;
}

function readEnv(name: string): string | undefined {
  try {
    return Deno.env.get(name);
  } catch {
    return undefined; // no --allow-env: behave as if unset
  }
}

function load(): Clusters {
  const raw = readEnv("PGPIPE_TEST_CLUSTERS");
  if (!raw) return {};
  try {
    return JSON.parse(raw) as Clusters;
  } catch (e) {
    throw new Error(`PGPIPE_TEST_CLUSTERS is not valid JSON: ${(e as Error).message}`);
  }
}

const clusters = load();

/** The cluster with ssl=on, if the runner started one. */
export function tlsCluster(): ClusterInfo | undefined {
  return clusters.tls;
}

/** The cluster with ssl=off, if the runner started one. */
export function plainCluster(): ClusterInfo | undefined {
  return clusters.plain;
}

/** True when the runner's clusters are available (tests needing the auth matrix check this). */
export const hasClusters: boolean = clusters.tls !== undefined || clusters.plain !== undefined;

/**
 * URL for tests that just need a server: DATABASE_URL, else the trust user of a test cluster;
 * on PGlite (`--pg=pglite`), PGLITE_URL, which harness/postgres.ts turns into a PGlite client.
 */
export function databaseUrl(): string {
  if (onPglite) return PGLITE_URL;
  const url = readEnv("DATABASE_URL");
  if (url) return url;
  const c = clusters.tls ?? clusters.plain;
  if (!c) {
    throw new Error("no test database: run the tests with `deno task test` (or set DATABASE_URL)");
  }
  return `postgres://${c.users.trust.user}@${c.host}:${c.port}/${c.database}`;
}

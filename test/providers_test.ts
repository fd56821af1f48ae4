/**
 * Connection strings shaped as managed PostgreSQL providers hand them out, pasted as they are
 * against local servers configured like each provider: TLS with a private CA or a certificate the
 * client cannot verify, the provider's authentication method, client certificates where it uses
 * them, and a TLS-terminating SCRAM pooler. Only the host, port and credentials are the local
 * server's. Each test checks the session is encrypted and which TLS path it took.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import postgres, { type Options } from "../mod.ts";
import type { ClusterInfo, TestUser } from "./harness/cluster.ts";
import { tlsCluster } from "./harness/env.ts";
import { type Bouncer, findPgbouncer, startPgbouncer } from "./harness/pgbouncer.ts";
import { withEnv } from "./harness/util.ts";
import { quiet } from "./harness/connect.ts";

const c = tlsCluster();

/** A URL's user and password part. */
const auth = (u: TestUser) => `${u.user}:${encodeURIComponent(u.password)}`;
/** A value for libpq's keyword/value string: quoted, with ' and \ escaped. */
const kv = (text: string) => `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;

interface Shape {
  /** The provider and what its string looks like. */
  name: string;
  /** The string as the provider documents it, pointed at the local server. */
  connection: (c: ClusterInfo, pooler?: Bouncer) => string;
  /** What the user adds beside the string (the provider's advice), if anything. */
  options?: (c: ClusterInfo) => Options;
  /** The user the session must run as. */
  user: (c: ClusterInfo) => TestUser;
  /** The TLS path of the first connection and of a later one. */
  paths: [string, string];
  /** Runs through the TLS-terminating SCRAM pooler instead of the server itself. */
  pooler?: boolean;
  /** Environment variables instead of a string (Deno Deploy). */
  env?: (c: ClusterInfo) => Record<string, string>;
}

const SHAPES: Shape[] = [
  {
    name: "Neon: postgresql://user:pass@ep-….neon.tech/db?sslmode=require&channel_binding=require",
    connection: (c) =>
      `postgresql://${auth(c.users.scram)}@localhost:${c.port}/${c.database}` +
      "?sslmode=require&channel_binding=require",
    user: (c) => c.users.scram,
    // Channel binding needs the server's certificate, which only node:tls shows.
    paths: ["node", "node"],
  },
  {
    name: "Supabase direct: postgresql://postgres:pass@db.<ref>.supabase.co:5432/postgres",
    connection: (c) => `postgresql://${auth(c.users.scram)}@localhost:${c.port}/${c.database}`,
    user: (c) => c.users.scram,
    // prefer, with Supabase's own CA not given: node:tls, which checks nothing and stays.
    paths: ["node", "node"],
  },
  {
    name: "Supabase direct with its CA: …?sslmode=verify-full&sslrootcert=prod-ca-2021.crt",
    connection: (c) =>
      `postgresql://${auth(c.users.scram)}@localhost:${c.port}/${c.database}` +
      `?sslmode=verify-full&sslrootcert=${c.caCertPath}`,
    user: (c) => c.users.scram,
    paths: ["node", "native"],
  },
  {
    name:
      "Supabase pooler, transaction mode: postgresql://postgres.<ref>:pass@…pooler.supabase.com:6543/postgres",
    connection: (_c, pooler) =>
      `postgresql://${auth(c!.users.scram)}@localhost:${pooler!.port}/${c!.database}`,
    // Supabase's advice for postgres.js in transaction mode.
    options: () => ({ prepare: false }),
    user: (c) => c.users.scram,
    pooler: true,
    paths: ["node", "node"],
  },
  {
    name:
      "AWS RDS / Aurora: postgres://user:pass@….rds.amazonaws.com:5432/db?sslmode=verify-full&sslrootcert=global-bundle.pem",
    connection: (c) =>
      `postgres://${auth(c.users.scram)}@localhost:${c.port}/${c.database}` +
      `?sslmode=verify-full&sslrootcert=${c.caCertPath}`,
    user: (c) => c.users.scram,
    paths: ["node", "native"],
  },
  {
    name:
      "AWS RDS with MD5 (an older instance): postgres://…?sslmode=require&sslrootcert=global-bundle.pem",
    connection: (c) =>
      `postgres://${auth(c.users.md5)}@localhost:${c.port}/${c.database}` +
      `?sslmode=require&sslrootcert=${c.caCertPath}`,
    user: (c) => c.users.md5,
    paths: ["node", "native"],
  },
  {
    name:
      "Google Cloud SQL, client certificate: sslmode=verify-ca sslrootcert=server-ca.pem sslcert=client-cert.pem sslkey=client-key.pem hostaddr=<IP> …",
    connection: (c) =>
      `sslmode=verify-ca sslrootcert=${c.caCertPath} sslcert=${c.clientCerts!.certfull.certPath} ` +
      `sslkey=${c.clientCerts!.certfull.keyPath} hostaddr=127.0.0.1 port=${c.port} ` +
      `user=${c.users.certfull.user} password=${
        kv(c.users.certfull.password)
      } dbname=${c.database}`,
    user: (c) => c.users.certfull,
    paths: ["node", "node"],
  },
  {
    name: "Google Cloud SQL, certificate only (pg_hba cert) from PEM text, as on Deno Deploy",
    connection: (c) =>
      `postgres://${c.users.cert.user}@127.0.0.1:${c.port}/${c.database}?sslmode=verify-ca`,
    options: (c) => ({
      ssl: {
        mode: "verify-ca",
        ca: Deno.readTextFileSync(c.caCertPath!),
        cert: Deno.readTextFileSync(c.clientCerts!.cert.certPath),
        key: Deno.readTextFileSync(c.clientCerts!.cert.keyPath),
      },
    }),
    user: (c) => c.users.cert,
    paths: ["node", "node"],
  },
  {
    name:
      "Azure Database for PostgreSQL: host=….postgres.database.azure.com port=5432 dbname=… user=… password=… sslmode=require",
    connection: (c) =>
      `host=localhost port=${c.port} dbname=${c.database} user=${c.users.scram.user} ` +
      `password=${kv(c.users.scram.password)} sslmode=require`,
    user: (c) => c.users.scram,
    // Azure's certificates chain to public roots, so there later connections go native; here the
    // CA is private and not given.
    paths: ["node", "node"],
  },
  {
    name:
      "Heroku: postgres://user:pass@ec2-….compute-1.amazonaws.com:5432/db (TLS required, self-signed)",
    connection: (c) => `postgres://${auth(c.users.sslonly)}@localhost:${c.port}/${c.database}`,
    options: () => ({ ssl: { rejectUnauthorized: false } }), // Heroku's advice for node drivers
    user: (c) => c.users.sslonly,
    paths: ["node", "node"],
  },
  {
    name: "Render (external): postgresql://user:pass@dpg-….render.com/db (TLS required)",
    connection: (c) => `postgresql://${auth(c.users.sslonly)}@localhost:${c.port}/${c.database}`,
    user: (c) => c.users.sslonly,
    paths: ["node", "node"],
  },
  {
    name: "Railway: postgresql://postgres:pass@….proxy.rlwy.net:<port>/railway",
    connection: (c) => `postgresql://${auth(c.users.scram)}@localhost:${c.port}/${c.database}`,
    user: (c) => c.users.scram,
    paths: ["node", "node"],
  },
  {
    name:
      "Crunchy Bridge: postgres://application:pass@p.<id>.db.postgresbridge.com:5432/postgres?sslmode=require",
    connection: (c) =>
      `postgres://${auth(c.users.scram)}@localhost:${c.port}/${c.database}?sslmode=require`,
    user: (c) => c.users.scram,
    paths: ["node", "node"],
  },
  {
    name: "Deno Deploy's databases: PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE",
    connection: () => "",
    env: (c) => ({
      PGHOST: "localhost",
      PGPORT: String(c.port),
      PGDATABASE: c.database,
      PGUSER: c.users.scram.user,
      PGPASSWORD: c.users.scram.password,
      PGSSLMODE: "require",
    }),
    user: (c) => c.users.scram,
    paths: ["node", "node"],
  },
];

/** Connects as the shape says, twice (a first connection, then a later one); the TLS paths. */
async function connectAs(shape: Shape, c: ClusterInfo, pooler?: Bouncer): Promise<string[]> {
  const string = shape.connection(c, pooler);
  const sql = string === ""
    ? postgres({ ...quiet, ...shape.options?.(c) })
    : postgres(string, { ...quiet, ...shape.options?.(c) });
  try {
    const paths: string[] = [];
    const first = await sql.reserve();
    const second = await sql.reserve();
    for (const conn of [first, second]) {
      const result = await conn`select current_user as u`;
      assert.equal(result[0].u, shape.user(c).user);
      paths.push(String(result.state?.tls));
      if (!shape.pooler) {
        const [row] = await conn`select ssl from pg_stat_ssl where pid = pg_backend_pid()`;
        assert.equal(row.ssl, true, "encrypted");
      }
    }
    first.release();
    second.release();
    return paths;
  } finally {
    await sql.end();
  }
}

if (c !== undefined && findPgbouncer() === null) {
  console.log("providers_test: the pooler shapes skipped: pgbouncer is not installed");
}
for (const shape of SHAPES) {
  Deno.test({
    name: `provider: ${shape.name}`,
    ignore: c === undefined || (shape.pooler === true && findPgbouncer() === null),
    fn: async () => {
      let pooler: Bouncer | undefined;
      if (shape.pooler) {
        pooler = await startPgbouncer({
          server: { host: c!.host, port: c!.port },
          users: [c!.users.scram.user],
          passwords: { [c!.users.scram.user]: c!.users.scram.password },
          tls: {
            certFile: join(c!.certDir!, "server.crt"),
            keyFile: join(c!.certDir!, "server.key"),
          },
        });
      }
      try {
        const vars = shape.env?.(c!) ?? {};
        let paths: string[] = [];
        await withEnv(vars, async () => {
          paths = await connectAs(shape, c!, pooler);
        });
        // The first connection's path depends on what this process learned of the server
        // before (another test may have connected to it); a later one's is settled.
        assert.ok(["node", "native"].includes(paths[0]), `first: ${paths[0]}`);
        assert.equal(paths[1], shape.paths[1], "a later connection's TLS path");
      } finally {
        await pooler?.stop();
      }
    },
  });
}

/**
 * libpq's keywords: each is honoured with libpq's meaning or refused at `postgres()` saying why,
 * from the URL, the options object and its `PG*` variable; the service file, the password file,
 * client certificates, and the checks of postgres.js's own numeric options.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import postgres, { type Options } from "../mod.ts";
import { resolveOptions } from "../src/config/resolve.ts";
import { parseRequireAuth } from "../src/protocol/auth_policy.ts";
import { CertDir, noOpenssl, type Pair } from "./harness/certs.ts";
import { databaseUrl, hasClusters, plainCluster } from "./harness/env.ts";
import { withEnv } from "./harness/util.ts";
import { quiet } from "./harness/connect.ts";

/** Throws like resolveOptions would from each source: the URL, the options object, `env`. */
function refusedEverywhere(
  keyword: string,
  value: string,
  pattern: RegExp,
  env?: string,
): Promise<void> {
  assert.throws(
    () => resolveOptions(`postgres://h/d?${keyword}=${encodeURIComponent(value)}`),
    pattern,
    `${keyword} from the URL`,
  );
  assert.throws(
    () => resolveOptions("postgres://h/d", { [keyword]: value } as Options),
    pattern,
    `${keyword} from the options object`,
  );
  if (env === undefined) return Promise.resolve();
  return withEnv({ [env]: value }, () => {
    assert.throws(() => resolveOptions("postgres://h/d"), pattern, `${keyword} from ${env}`);
  });
}

Deno.test("keywords pgpipe cannot honour are refused from every source, naming themselves and why", async () => {
  const refused: [string, string, RegExp, string?][] = [
    ["tcp_user_timeout", "1000", /tcp_user_timeout=1000 is not supported: Deno gives no access/],
    ["keepalives_interval", "10", /keepalives_interval=10 is not supported/],
    ["keepalives_count", "5", /keepalives_count=5 is not supported/],
    ["replication", "database", /replication=database is not supported: pgpipe opens/],
    [
      "gssencmode",
      "require",
      /gssencmode=require is not supported: pgpipe has no GSSAPI/,
      "PGGSSENCMODE",
    ],
    ["sslcompression", "1", /sslcompression=1 is not supported/, "PGSSLCOMPRESSION"],
    ["sslcrl", "/etc/crl.pem", /sslcrl=\/etc\/crl.pem is not supported: .*revocation/, "PGSSLCRL"],
    ["sslcrldir", "/etc/crls", /sslcrldir=\/etc\/crls is not supported/, "PGSSLCRLDIR"],
    ["sslkeylogfile", "/tmp/keys", /sslkeylogfile=\/tmp\/keys is not supported: .*SSLKEYLOGFILE/],
    [
      "requirepeer",
      "postgres",
      /requirepeer=postgres is not supported: Deno cannot read/,
      "PGREQUIREPEER",
    ],
    ["sslcertmode", "require", /sslcertmode=require is not supported/, "PGSSLCERTMODE"],
    [
      "oauth_issuer",
      "https://id.example",
      /oauth_issuer=https:\/\/id.example is not supported: .*OAuth/,
    ],
    ["oauth_client_id", "x", /oauth_client_id=x is not supported/],
    ["oauth_scope", "openid", /oauth_scope=openid is not supported/],
    [
      "client_encoding",
      "LATIN1",
      /client_encoding=LATIN1 is not supported: .*UTF-8/,
      "PGCLIENTENCODING",
    ],
    ["ssl_max_protocol_version", "TLSv1.1", /TLS 1.2 and 1.3 only/, "PGSSLMAXPROTOCOLVERSION"],
    ["channel_binding", "sometimes", /invalid channel_binding "sometimes"/, "PGCHANNELBINDING"],
    ["require_auth", "kerberos", /"kerberos" is not one of/, "PGREQUIREAUTH"],
    ["gsslib", "mit", /invalid gsslib "mit"/, "PGGSSLIB"],
    ["min_protocol_version", "2.0", /invalid min_protocol_version "2.0"/, "PGMINPROTOCOLVERSION"],
    [
      "hostaddr",
      "db.example.com",
      /invalid hostaddr "db.example.com": give a numeric IP/,
      "PGHOSTADDR",
    ],
    ["keepalives", "yes", /invalid keepalives "yes": use 1 or 0/],
    ["sslsni", "2", /invalid sslsni "2"/, "PGSSLSNI"],
  ];
  for (const [keyword, value, pattern, env] of refused) {
    await refusedEverywhere(keyword, value, pattern, env);
  }
  // A secret's value is never quoted.
  assert.throws(
    () => resolveOptions("postgres://h/d?oauth_client_secret=hunter2"),
    (e: Error) =>
      /oauth_client_secret is not supported/.test(e.message) && !e.message.includes("hunter2"),
  );
});

Deno.test("keywords harmless without the feature are accepted (libpq's defaults and values that ask for nothing missing)", () => {
  const harmless = [
    "gssencmode=disable",
    "gssencmode=prefer",
    "sslcompression=0",
    "keepalives_interval=0",
    "keepalives_count=0",
    "tcp_user_timeout=0",
    "replication=false",
    "replication=off",
    "krbsrvname=postgres",
    "gsslib=gssapi",
    "gssdelegation=1",
    "sslcrl=",
    "sslcertmode=allow",
    "sslcertmode=disable",
    "ssl_min_protocol_version=TLSv1",
    "oauth_issuer=",
  ];
  for (const setting of harmless) {
    const r = resolveOptions(`postgres://h/d?${setting}&sslmode=disable`);
    assert.deepEqual(
      Object.keys(r.params).sort(),
      ["DateStyle", "application_name", "client_encoding", "database", "user"],
      setting,
    );
  }
});

Deno.test("keepalives: keepalives_idle is the delay of probes that are on, and nothing with keepalives=0", () => {
  assert.deepEqual(resolveOptions("postgres://h/d").keepalive, { enabled: true });
  assert.deepEqual(resolveOptions("postgres://h/d?keepalives_idle=30").keepalive, {
    enabled: true,
    idleMs: 30_000,
  });
  // No delay for probes that are off: it would only move the connection to node:net (and its
  // TLS to node:tls, see connect.ts's nativeCannot) for nothing.
  assert.deepEqual(
    resolveOptions("postgres://h/d?keepalives=0&keepalives_idle=30").keepalive,
    { enabled: false },
  );
});

Deno.test("client_encoding: UTF8 in any of libpq's spellings, or auto", () => {
  for (const name of ["UTF8", "utf8", "UTF-8", "unicode", "auto"]) {
    assert.equal(
      resolveOptions(`postgres://h/d?client_encoding=${name}`).params.client_encoding,
      "UTF8",
    );
  }
});

Deno.test({
  name:
    "options (PGOPTIONS) is sent as the server's command-line options; fallback_application_name fills in for application_name",
  ignore: !hasClusters,
  fn: async () => {
    await withEnv({ PGOPTIONS: "-c search_path=from_env", PGAPPNAME: undefined }, async () => {
      await using sql = postgres(`${databaseUrl()}?fallback_application_name=fb`, quiet);
      const [row] = await sql`select current_setting('search_path') as path,
        current_setting('application_name') as app`;
      assert.deepEqual({ ...row }, { path: "from_env", app: "fb" });
    });
    await using url = postgres(
      `${databaseUrl()}?options=${encodeURIComponent("-c search_path=from_url -c geqo=off")}` +
        "&application_name=given&fallback_application_name=fb",
      quiet,
    );
    const [row] = await url`select current_setting('search_path') as path,
      current_setting('geqo') as geqo, current_setting('application_name') as app`;
    assert.deepEqual({ ...row }, { path: "from_url", geqo: "off", app: "given" });
  },
});

Deno.test("require_auth: lists, negations and libpq's refusals", () => {
  assert.deepEqual([...parseRequireAuth("scram-sha-256,md5").allowed].sort(), [
    "md5",
    "scram-sha-256",
  ]);
  assert.deepEqual(
    [...parseRequireAuth("!password,!md5").allowed].sort(),
    ["gss", "none", "oauth", "scram-sha-256", "sspi"],
  );
  assert.throws(() => parseRequireAuth("md5,!password"), /cannot be mixed/);
  assert.throws(() => parseRequireAuth("md5,md5"), /"md5" is listed twice/);
  assert.throws(() => parseRequireAuth("gss,sspi"), /allows only methods pgpipe does not have/);
  assert.throws(
    () => parseRequireAuth("!password,!md5,!scram-sha-256,!none"),
    /allows only methods/,
  );
  assert.equal(resolveOptions("postgres://h/d?require_auth=").auth.requireAuth, undefined);
  assert.throws(
    () =>
      resolveOptions(
        "postgres://h/d?require_auth=password&channel_binding=require&sslmode=require",
      ),
    /channel_binding=require needs SCRAM, which require_auth=password does not allow/,
  );
});

Deno.test("numeric options read the same from every source: numbers or numeric strings, checked at postgres()", () => {
  const o = resolveOptions("postgres://h/d", {
    max: "5",
    idle_timeout: "5",
    max_lifetime: 60,
    query_timeout: "1.5",
    max_pipeline: "20",
    max_queue: "0",
    max_statements: "10",
    max_pipeline_bytes: "65536",
  } as unknown as Options);
  assert.deepEqual(
    [
      o.max,
      o.idleTimeout,
      o.maxLifetime,
      o.queryTimeout,
      o.maxPipeline,
      o.maxQueue,
      o.maxStatements,
    ],
    [5, 5000, 60_000, 1500, 20, 0, 10],
  );
  assert.equal(o.maxPipelineBytes, 65536);
  const u = resolveOptions("postgres://h/d?max=5&idle_timeout=5&query_timeout=2&max_queue=7");
  assert.deepEqual([u.max, u.idleTimeout, u.queryTimeout, u.maxQueue], [5, 5000, 2000, 7]);
  const bad: [Options | string, RegExp][] = [
    ["postgres://h/d?query_timeout=abc", /invalid query_timeout: "abc"/],
    [{ query_timeout: "abc" } as unknown as Options, /invalid query_timeout/],
    [{ query_timeout: -1 }, /invalid query_timeout: -1/],
    [{ idle_timeout: Infinity }, /invalid idle_timeout: Infinity/],
    [{ max_lifetime: 60 * 60 * 24 * 30 }, /at most 1728000/],
    [{ connect_timeout: 1e9 }, /invalid connect_timeout/],
    [{ max: true } as unknown as Options, /max must be a positive integer; got true/],
    [{ max: 2.5 }, /max must be a positive integer; got 2.5/],
    [{ max: "" } as unknown as Options, /max must be a positive integer; got ""/],
    ["postgres://h/d?max=", /max must be a positive integer; got ""/],
    [{ max_statements: -1 }, /max_statements must be an integer of 0 or more/],
    [{ fetch_types: 1 } as unknown as Options, /fetch_types must be true or false; got 1/],
    [{ bigint: "yes please" as unknown as boolean, max: {} } as unknown as Options, /max must be/],
  ];
  for (const [given, pattern] of bad) {
    assert.throws(
      () =>
        typeof given === "string" ? resolveOptions(given) : resolveOptions("postgres://h/d", given),
      pattern,
      JSON.stringify(given),
    );
  }
});

Deno.test({
  name: "the ssl object: postgres.js's node:tls keys honoured, any other refused, mode checked",
  ignore: noOpenssl,
  fn: async () => {
    const { ca } = await certMaterial();
    const mode = (ssl: unknown) => resolveOptions("postgres://h/d", { ssl } as Options).sslmode;
    assert.equal(mode({}), "verify-full", "node:tls verifies unless told not to");
    assert.equal(mode({ rejectUnauthorized: false }), "require");
    assert.equal(mode({ rejectUnauthorized: true }), "verify-full");
    assert.equal(mode({ mode: "verify-ca", ca: ca.cert }), "verify-ca");
    assert.equal(
      mode({ ca: new TextEncoder().encode(ca.cert) }),
      "verify-full",
      "bytes (a Buffer)",
    );
    assert.throws(() => mode({ ca: "x" }), /ssl.ca holds no PEM certificate/);
    const broken = ca.cert.replace(/\n[A-Za-z0-9+/]{10}/, "\n!!!!!!!!!!");
    assert.throws(() => mode({ ca: broken }), /ssl.ca holds a certificate that cannot be read/);
    assert.throws(
      () =>
        resolveOptions("postgres://h/d?sslmode=require&sslrootcert=-----BEGIN%20CERTIFICATE-----"),
      /sslrootcert holds no PEM certificate/,
    );
    assert.throws(() => mode({ mode: "bogus" }), /invalid ssl.mode "bogus": use one of disable/);
    assert.throws(
      () => mode({ ciphers: "HIGH" }),
      /ssl.ciphers is not supported: the ssl option takes mode, ca/,
    );
    assert.throws(
      () => mode({ checkServerIdentity: () => undefined }),
      /ssl.checkServerIdentity is not supported/,
    );
    assert.throws(() => mode({ mode: "verify-full", rejectUnauthorized: false }), /contradicts/);
    assert.throws(() => mode({ mode: "require", rejectUnauthorized: true }), /contradicts/);
    assert.throws(() => mode({ cert: 42 }), /ssl.cert must be PEM text/);
    assert.throws(() => mode(7), /ssl must be a boolean, an sslmode or an object/);
    const r = resolveOptions("postgres://h/d", {
      ssl: { servername: "db.internal", minVersion: "TLSv1.3", rejectUnauthorized: false },
    });
    assert.deepEqual(
      [r.tls.servername, r.tls.minVersion, r.tls.maxVersion],
      ["db.internal", "TLSv1.3", "TLSv1.3"],
    );
    assert.throws(
      () =>
        resolveOptions(
          "postgres://h/d?ssl_min_protocol_version=TLSv1.3&ssl_max_protocol_version=TLSv1.2",
        ),
      /ssl_min_protocol_version TLSv1.3 is above ssl_max_protocol_version TLSv1.2/,
    );
    assert.throws(
      () => resolveOptions("postgres://h/d?min_protocol_version=3.2&max_protocol_version=3.0"),
      /min_protocol_version 3.2 is above max_protocol_version 3.0/,
    );
  },
});

// ---------------------------------------------------------------------------------------------
// Client certificates

let certs: CertDir | undefined;
let material: { ca: Pair; rsa: Pair; ec: Pair; other: Pair } | undefined;

/** The folder for this file's certificates and other files (no openssl needed to make it). */
async function folder(): Promise<CertDir> {
  return certs ??= await CertDir.create("pgpipe-keywords-");
}

async function certMaterial() {
  if (material === undefined) {
    const certs = await folder();
    const ca = await certs.ca("ca");
    material = {
      ca,
      rsa: await certs.leaf("rsa", ca, { cn: "alice", client: true, rsa: true }),
      ec: await certs.leaf("ec", ca, { cn: "alice", client: true }),
      other: await certs.leaf("other", ca, { cn: "bob", client: true }),
    };
  }
  return { certs: await folder(), ...material };
}

const certOf = (o: Options, url = "postgres://h/d?sslmode=require") =>
  resolveOptions(url, o).tls.clientCertificate;

Deno.test({
  name: "client certificates: files or PEM text; PKCS#1, SEC1, PKCS#8, encrypted with sslpassword",
  ignore: noOpenssl,
  fn: async () => {
    const { certs, rsa, ec } = await certMaterial();
    const forms: [Pair, "pkcs1" | "sec1" | "pkcs8" | "pkcs8-enc" | "legacy-enc"][] = [
      [rsa, "pkcs1"],
      [rsa, "pkcs8"],
      [rsa, "pkcs8-enc"],
      [rsa, "legacy-enc"],
      [ec, "sec1"],
      [ec, "pkcs8-enc"],
    ];
    for (const [pair, form] of forms) {
      const key = await certs.key(pair, form, "s3cret");
      const encrypted = form.endsWith("-enc");
      const fromText = certOf({
        sslcert: pair.cert,
        sslkey: key,
        ...(encrypted ? { sslpassword: "s3cret" } : {}),
      });
      assert.ok(
        fromText?.key.startsWith("-----BEGIN PRIVATE KEY-----"),
        `${form}: unencrypted PKCS#8`,
      );
      assert.equal(fromText?.cert, pair.cert);
      const keyPath = await certs.file(`${form}-${pair === rsa ? "rsa" : "ec"}.key`, key);
      const fromFiles = certOf(
        {},
        `postgres://h/d?sslmode=require&sslcert=${pair.certPath}&sslkey=${keyPath}` +
          (encrypted ? "&sslpassword=s3cret" : ""),
      );
      assert.equal(fromFiles?.key, fromText?.key, form);
      // postgres.js's way: the ssl object.
      const fromSsl = certOf({
        ssl: {
          rejectUnauthorized: false,
          cert: pair.cert,
          key,
          ...(encrypted ? { passphrase: "s3cret" } : {}),
        },
      });
      assert.equal(fromSsl?.key, fromText?.key);
    }
  },
});

Deno.test({
  name:
    "client certificates: a wrong passphrase, a missing one, a mismatched pair, a loose key file: TypeErrors that quote no secret",
  ignore: noOpenssl,
  fn: async () => {
    const { certs, rsa, other } = await certMaterial();
    const encrypted = await certs.key(rsa, "pkcs8-enc", "right-pass");
    const cases: [Options, RegExp][] = [
      [
        { sslcert: rsa.cert, sslkey: encrypted, sslpassword: "wrong-pass" },
        /sslpassword does not decrypt sslkey/,
      ],
      [
        { sslcert: rsa.cert, sslkey: encrypted },
        /sslkey is encrypted: give its passphrase as sslpassword/,
      ],
      [
        { sslcert: rsa.cert, sslkey: other.key },
        /sslkey is not the private key of sslcert's certificate/,
      ],
      [
        {
          sslcert: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
          sslkey: rsa.key,
        },
        /sslcert is not a PEM certificate/,
      ],
      // A key as openssl pkcs12 exports it (attribute lines before the PEM) is text, not a file
      // name: an error must not quote it as one.
      [
        { sslcert: rsa.cert, sslkey: `Bag Attributes\n    localKeyID: 01\n${other.key}` },
        /sslkey is not the private key of sslcert's certificate/,
      ],
      // Key text in a form pgpipe does not read (no PEM header) is not quoted either.
      [
        { sslcert: rsa.cert, sslkey: rsa.key.split("\n").slice(1, -2).join("\n") },
        /sslkey is neither PEM text nor the name of a readable file/,
      ],
    ];
    for (const [options, pattern] of cases) {
      assert.throws(
        () => certOf(options),
        (e: Error) => {
          assert.ok(e instanceof TypeError);
          assert.match(e.message, pattern);
          for (
            const secret of ["wrong-pass", "right-pass", "PRIVATE KEY", rsa.key.split("\n")[1]]
          ) {
            assert.ok(!e.message.includes(secret), `"${e.message}" quotes a secret`);
          }
          return true;
        },
      );
    }
    const loose = await certs.file("loose.key", rsa.key, 0o644);
    assert.throws(
      () => certOf({ sslcert: rsa.certPath, sslkey: loose }),
      /has group or world access/,
    );
    // Nothing is read for a connection that never encrypts, or with sslcertmode=disable.
    assert.equal(
      certOf({ sslcert: "/nonexistent/c.crt", sslkey: loose }, "postgres://h/d?sslmode=disable"),
      undefined,
    );
    assert.equal(certOf({ sslcert: "/nonexistent/c.crt", sslcertmode: "disable" }), undefined);
    // As libpq: a certificate file that does not exist is no certificate (its key is not read).
    assert.equal(certOf({ sslcert: "/nonexistent/c.crt", sslkey: loose }), undefined);
    assert.equal(certOf({ sslcert: `${rsa.certPath}/below-a-file`, sslkey: loose }), undefined);
  },
});

Deno.test({
  name:
    "client certificates: libpq's default ~/.postgresql/postgresql.crt and .key, found as libpq finds them",
  ignore: noOpenssl,
  fn: async () => {
    const { certs, ec } = await certMaterial();
    const home = join(certs.dir, "home");
    await Deno.mkdir(join(home, ".postgresql"), { recursive: true });
    await withEnv(
      { HOME: home, PGSSLCERT: undefined, PGSSLKEY: undefined, PGSSLROOTCERT: undefined },
      async () => {
        assert.equal(certOf({}), undefined, "no files: no certificate");
        // libpq reads sslkey only for a certificate: without one it is not even looked at.
        assert.equal(certOf({ sslkey: "/nonexistent/k.key" }), undefined);
        assert.equal(certOf({ sslcert: "", sslkey: "" }), undefined, "empty means not given");
        await Deno.copyFile(ec.certPath, join(home, ".postgresql", "postgresql.crt"));
        assert.throws(
          () => certOf({}),
          /cannot read sslkey .*postgresql.key/,
          "a certificate without its key",
        );
        assert.throws(
          () => certOf({ sslcert: ec.cert }),
          /cannot read sslkey .*postgresql.key/,
          "sslcert without sslkey takes the default key, as libpq",
        );
        // sslkey without sslcert: the default certificate with that key.
        assert.equal(certOf({ sslkey: ec.key })?.cert, ec.cert);
        await Deno.writeTextFile(join(home, ".postgresql", "postgresql.key"), ec.key, {
          mode: 0o600,
        });
        assert.equal(certOf({})?.cert, ec.cert);
        assert.equal(certOf({ sslcert: ec.certPath })?.cert, ec.cert, "with the default key");
        assert.equal(certOf({ sslcert: "" })?.cert, ec.cert, "empty sslcert: the default file");
      },
    );
  },
});

Deno.test({
  name:
    "root certificates: ~/.postgresql/root.crt, and root.crl refused wherever libpq would check it",
  ignore: noOpenssl,
  fn: async () => {
    const { certs, ca } = await certMaterial();
    const home = join(certs.dir, "home-roots");
    const dir = join(home, ".postgresql");
    await Deno.mkdir(dir, { recursive: true });
    const caFile = await certs.file("roots-ca.crt", ca.cert);
    const resolve = (query: string, o: Options = {}) =>
      resolveOptions(`postgres://h/d?${query}`, o);
    await withEnv(
      { HOME: home, PGSSLROOTCERT: undefined, PGSSLCRL: undefined, PGSSLCRLDIR: undefined },
      async () => {
        await Deno.writeTextFile(join(dir, "root.crl"), "");
        // No root certificate: libpq verifies nothing, so it loads no revocation list either.
        assert.equal(resolve("sslmode=require").ca, undefined);
        assert.equal(resolve("sslmode=verify-full&sslrootcert=system").ca, undefined);
        // A root certificate given, in any form: libpq checks the list as well.
        const refused = /root\.crl exists: libpq checks .* remove or rename that file/;
        assert.throws(() => resolve(`sslmode=require&sslrootcert=${caFile}`), refused);
        assert.throws(() => resolve("sslmode=prefer", { sslrootcert: ca.cert }), refused);
        assert.throws(() => resolve("", { ssl: { mode: "verify-ca", ca: ca.cert } }), refused);
        // An empty sslcrl is not given: the default list still applies (libpq's rule).
        assert.throws(() => resolve(`sslmode=verify-ca&sslrootcert=${caFile}&sslcrl=`), refused);
        // Nothing is read for a connection that never encrypts.
        assert.equal(resolve(`sslmode=disable&sslrootcert=${caFile}`).ca, undefined);
        await Deno.writeTextFile(join(dir, "root.crt"), ca.cert);
        assert.throws(() => resolve("sslmode=require"), refused, "the default root.crt");
        await Deno.remove(join(dir, "root.crl"));
        assert.deepEqual(resolve("sslmode=require").ca, [ca.cert]);
        assert.deepEqual(resolve("sslmode=prefer&sslrootcert=").ca, [ca.cert], "empty: default");
      },
    );
  },
});

// ---------------------------------------------------------------------------------------------
// The service file and the password file

Deno.test({
  name: "service file: a section's keywords come after the URL and options, before the environment",
  fn: async () => {
    const certs = await folder();
    const file = await certs.file(
      "pg_service.conf",
      [
        "# comment",
        "[other]",
        "dbname=wrong",
        "[app]",
        "host=svc-host",
        "port=6000",
        "dbname = svcdb",
        "user=svcuser",
        "sslmode=require",
        "application_name=svc app",
        "[after]",
        "dbname=wrong-too",
      ].join("\n"),
    );
    await withEnv({
      PGSERVICEFILE: file,
      PGSERVICE: undefined,
      PGDATABASE: "envdb",
      PGHOST: "envhost",
      PGPORT: "7000",
    }, () => {
      const r = resolveOptions("postgres://u@/?service=app");
      assert.deepEqual(
        [r.host, r.port, r.database, r.user, r.sslmode, r.params.application_name],
        ["svc-host", 6000, "svcdb", "u", "require", "svc app"],
      );
      const byOption = resolveOptions(undefined, { service: "app", database: "optdb" });
      assert.deepEqual([byOption.database, byOption.user], ["optdb", "svcuser"]);
      assert.equal(resolveOptions(undefined).database, "envdb", "no service: the environment");
      assert.throws(
        () => resolveOptions("postgres://h/d?service=missing"),
        /definition of service "missing" not found/,
      );
    });
    const bad = await certs.file("bad.conf", "[x]\nhost=a\nmax=5\n");
    assert.throws(
      () => resolveOptions(`postgres://h/d?service=x&servicefile=${bad}`),
      /line 3: "max" is not a libpq keyword/,
    );
    const nested = await certs.file("nested.conf", "[x]\nservice=y\n");
    assert.throws(
      () => resolveOptions(`postgres://h/d?service=x&servicefile=${nested}`),
      /nested service/,
    );
    // PGSYSCONFDIR's pg_service.conf after the user's file.
    const sysconf = join(certs.dir, "sysconf");
    await Deno.mkdir(sysconf, { recursive: true });
    await Deno.writeTextFile(join(sysconf, "pg_service.conf"), "[sys]\ndbname=sysdb\n");
    await withEnv({ PGSERVICEFILE: undefined, HOME: certs.dir, PGSYSCONFDIR: sysconf }, () => {
      assert.equal(resolveOptions("postgres://h/?service=sys").database, "sysdb");
    });
  },
});

Deno.test({
  name:
    "service file and passfile: a real connection from a service section, the password from the passfile",
  ignore: plainCluster() === undefined,
  fn: async () => {
    const certs = await folder();
    const c = plainCluster()!;
    const u = c.users.scram;
    const service = await certs.file(
      "real.conf",
      `[db]\nhost=${c.host}\nport=${c.port}\ndbname=${c.database}\nuser=${u.user}\nsslmode=disable\n`,
    );
    const escaped = u.password.replaceAll("\\", "\\\\").replaceAll(":", "\\:");
    const passfile = await certs.file("pgpass", `*:*:*:${u.user}:${escaped}\n`);
    await withEnv({ PGPASSWORD: undefined, PGSERVICEFILE: service }, async () => {
      await using sql = postgres(
        `postgres:///?service=db&passfile=${encodeURIComponent(passfile)}`,
        quiet,
      );
      const [row] = await sql`select current_user as u`;
      assert.equal(row.u, u.user);
    });
  },
});

Deno.test({
  name: "sql.options, errors and inspection show no secret",
  ignore: noOpenssl,
  fn: async () => {
    const { rsa, certs } = await certMaterial();
    const key = await certs.key(rsa, "pkcs8-enc", "pass-phrase-9");
    const clientKey = btoa("k".repeat(32));
    const sql = postgres("postgres://u:url-secret-1@h/d?sslmode=require", {
      sslcert: rsa.cert,
      sslkey: key,
      sslpassword: "pass-phrase-9",
      scram_client_key: clientKey,
      scram_server_key: btoa("s".repeat(32)),
    });
    for (
      const printed of [
        Deno.inspect(sql.options, { depth: 10 }),
        JSON.stringify(sql.options),
        Deno.inspect(sql, { depth: 4 }),
      ]
    ) {
      for (
        const secret of [
          "url-secret-1",
          "pass-phrase-9",
          "PRIVATE KEY",
          clientKey,
          rsa.cert.split("\n")[1],
        ]
      ) {
        assert.ok(!printed.includes(secret), `printed options show ${secret}`);
      }
    }
    assert.equal(sql.options.pass, "url-secret-1", "still there for who asks");
    await sql.end();
    assert.throws(
      () => resolveOptions("postgres://h/d?scram_client_key=c2VjcmV0LXZhbHVl"),
      (e: Error) =>
        /scram_client_key must be a 32-byte/.test(e.message) && !e.message.includes("c2VjcmV0"),
    );
  },
});

// An unload listener must finish synchronously: an async remove would be cut short.
addEventListener("unload", () => certs?.removeSync());

Deno.test({
  name: "min_protocol_version=3.2: a server before 18 answers 3.0 and is refused; 18 accepts",
  ignore: !hasClusters,
  fn: async () => {
    await using probe = postgres(databaseUrl(), quiet);
    const [{ v }] = await probe`select current_setting('server_version_num')::int as v`;
    await using sql = postgres(
      `${databaseUrl()}?min_protocol_version=3.2&max_protocol_version=3.2`,
      quiet,
    );
    if (v >= 180000) {
      const [row] = await sql`select 1 as one`;
      assert.equal(row.one, 1);
    } else {
      await assert.rejects(sql`select 1`, /speaks protocol 3.0, below min_protocol_version 3.2/);
    }
  },
});

Deno.test("libpq's keyword=value connection string: quoting, escapes, every keyword, libpq's errors", () => {
  assert.throws(
    () => resolveOptions("host=h search_path=x"),
    /invalid connection option "search_path"/,
  );
  const o = resolveOptions(
    "host=db.example.com port = 6432 dbname='my db' user=ada password='it\\'s a secret' " +
      "sslmode=verify-full sslrootcert=system application_name=a\\ b",
  );
  assert.deepEqual(
    [o.host, o.port, o.database, o.user, o.pass, o.sslmode, o.params.application_name],
    ["db.example.com", 6432, "my db", "ada", "it's a secret", "verify-full", "a b"],
  );
  assert.deepEqual(resolveOptions("host=a,b port=1,2").hosts.map((h) => `${h.host}:${h.port}`), [
    "a:1",
    "b:2",
  ]);
  assert.throws(() => resolveOptions("host=h dbname"), /missing "=" after "dbname"/);
  // An unquoted password with a space: its second word is not quoted back as a keyword.
  for (const text of ["host=h password=pass xq7z", "host=h password=pass xq=7z"]) {
    assert.throws(() => resolveOptions(text), (e: Error) => {
      assert.match(e.message, /the word after password's value \(quote a value that holds spaces/);
      assert.ok(!e.message.includes("xq"), e.message);
      return true;
    });
  }
  assert.throws(
    () => resolveOptions("host=h password='open"),
    (e: Error) =>
      /unterminated quoted value of "password"/.test(e.message) && !e.message.includes("open"),
  );
});

Deno.test({
  name:
    "libpq's keyword=value connection string connects as pasted (a Cloud SQL or Azure psql example)",
  ignore: plainCluster() === undefined,
  fn: async () => {
    const c = plainCluster()!;
    const u = c.users.scram;
    const password = u.password.replaceAll("\\", "\\\\").replaceAll("'", "\\'");
    await using sql = postgres(
      `host=${c.host} port=${c.port} dbname=${c.database} user=${u.user} password='${password}' sslmode=disable`,
      quiet,
    );
    const [row] = await sql`select current_user as u`;
    assert.equal(row.u, u.user);
  },
});

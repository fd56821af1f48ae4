// Test certificates made with openssl: CAs, server and client leaves (ECDSA P-256 or RSA),
// expired ones, and client keys in every form libpq reads (PKCS#8, PKCS#1, SEC1, encrypted).
// Everything goes into one folder the caller owns.
import { join } from "node:path";
import { run } from "./cluster.ts";

/** Why openssl cannot be run here, or null when it can. */
const opensslMissing: string | null = (() => {
  try {
    const ok = new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
      .outputSync().success;
    return ok ? null : "`openssl version` failed";
  } catch {
    return "no openssl on PATH";
  }
})();

/**
 * True where there is no openssl: the tests that need a CertDir are then ignored, and the one
 * line below says why (once per test process). The clusters' own certificates need no openssl
 * (cluster_certs.ts).
 */
export const noOpenssl: boolean = opensslMissing !== null;
if (noOpenssl) {
  console.log(
    `certs: the tests that make RSA, expired or client-key-format certificates skipped: ` +
      `${opensslMissing} (Debian: apt-get install openssl)`,
  );
}

/** A certificate and its key, as files and as PEM text. */
export interface Pair {
  certPath: string;
  keyPath: string;
  cert: string;
  key: string;
}

const CA_CNF = `[req]
distinguished_name = dn
x509_extensions = v3_ca
prompt = no
[dn]
CN = ca
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
`;

/** A folder of certificates: `ca()` makes an authority, `leaf()` a certificate it signs. */
export class CertDir {
  readonly dir: string;
  #serial = 0x1000;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /** A new folder (removed by `remove()`). */
  static async create(prefix = "pgpipe-certs-"): Promise<CertDir> {
    const dir = await Deno.makeTempDir({ prefix });
    await Deno.writeTextFile(join(dir, "ca.cnf"), CA_CNF);
    return new CertDir(dir);
  }

  #ssl(...args: string[]): Promise<string> {
    return run("openssl", args, { cwd: this.dir });
  }

  async #read(name: string): Promise<Pair> {
    const certPath = join(this.dir, `${name}.crt`);
    const keyPath = join(this.dir, `${name}.key`);
    await Deno.chmod(keyPath, 0o600);
    return {
      certPath,
      keyPath,
      cert: await Deno.readTextFile(certPath),
      key: await Deno.readTextFile(keyPath),
    };
  }

  #newKey(name: string, rsa: boolean): string[] {
    return rsa ? ["-newkey", "rsa:2048", "-nodes", "-keyout", `${name}.key`] : [
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-keyout",
      `${name}.key`,
    ];
  }

  /** A self-signed CA. */
  async ca(name: string, cn = name): Promise<Pair> {
    await this.#ssl(
      "req",
      "-x509",
      "-config",
      "ca.cnf",
      ...this.#newKey(name, false),
      "-subj",
      `/CN=${cn}`,
      "-days",
      "3650",
      "-out",
      `${name}.crt`,
    );
    return await this.#read(name);
  }

  /**
   * A leaf `ca` signs: a server certificate naming `names` (DNS names or IPs) in its
   * subjectAltName, or a client certificate (`client: true`) whose CN is the user name. `expired`
   * makes one whose validity ended in 2020; `rsa` an RSA key instead of ECDSA P-256.
   */
  async leaf(
    name: string,
    ca: Pair,
    o: { cn: string; names?: string[]; client?: boolean; expired?: boolean; rsa?: boolean },
  ): Promise<Pair> {
    const san = (o.names ?? []).map((n) => (/^[\d.]+$/.test(n) ? `IP:${n}` : `DNS:${n}`));
    const ext = [
      "basicConstraints = critical,CA:FALSE",
      `keyUsage = critical,digitalSignature${o.rsa ? ",keyEncipherment" : ""}`,
      `extendedKeyUsage = ${o.client ? "clientAuth" : "serverAuth"}`,
      ...(san.length > 0 ? [`subjectAltName = ${san.join(",")}`] : []),
      "subjectKeyIdentifier = hash",
      "authorityKeyIdentifier = keyid",
    ].join("\n") + "\n";
    await Deno.writeTextFile(join(this.dir, `${name}.ext`), ext);
    await this.#ssl(
      "req",
      "-new",
      "-config",
      "ca.cnf",
      ...this.#newKey(name, o.rsa ?? false),
      "-subj",
      `/CN=${o.cn}`,
      "-out",
      `${name}.csr`,
    );
    const serial = `0x${(this.#serial++).toString(16)}${
      crypto.randomUUID().replaceAll("-", "").slice(0, 8)
    }`;
    if (o.expired) await this.#signExpired(name, ca, serial);
    else {
      await this.#ssl(
        "x509",
        "-req",
        "-in",
        `${name}.csr`,
        "-CA",
        ca.certPath,
        "-CAkey",
        ca.keyPath,
        "-set_serial",
        serial,
        "-extfile",
        `${name}.ext`,
        "-days",
        "3650",
        "-out",
        `${name}.crt`,
      );
    }
    return await this.#read(name);
  }

  /** Signs with `openssl ca`, the one command that takes a validity in the past. */
  async #signExpired(name: string, ca: Pair, serial: string): Promise<void> {
    const db = join(this.dir, `${name}.db`);
    await Deno.mkdir(db, { recursive: true });
    await Deno.writeTextFile(join(db, "index.txt"), "");
    await Deno.writeTextFile(join(db, "serial"), serial.slice(2).padStart(2, "0") + "\n");
    await Deno.writeTextFile(
      join(this.dir, `${name}.ca.cnf`),
      `[ca]\ndefault_ca = d\n[d]\ndatabase = ${db}/index.txt\nserial = ${db}/serial\n` +
        `new_certs_dir = ${db}\ndefault_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n`,
    );
    await this.#ssl(
      "ca",
      "-batch",
      "-config",
      `${name}.ca.cnf`,
      "-cert",
      ca.certPath,
      "-keyfile",
      ca.keyPath,
      "-startdate",
      "20200101000000Z",
      "-enddate",
      "20200201000000Z",
      "-extfile",
      `${name}.ext`,
      "-notext",
      "-in",
      `${name}.csr`,
      "-out",
      `${name}.crt`,
    );
  }

  /**
   * `pair`'s key in another form: `pkcs1` (RSA only) or `sec1` (EC only), traditional PEM;
   * `pkcs8`; encrypted with `passphrase`: `pkcs8-enc` (PBES2, AES-256) or `legacy-enc` (the
   * traditional PEM with a DEK-Info header). Returns the PEM text.
   */
  async key(
    pair: Pair,
    form: "pkcs1" | "sec1" | "pkcs8" | "pkcs8-enc" | "legacy-enc",
    passphrase = "",
  ): Promise<string> {
    const out = join(this.dir, `${crypto.randomUUID()}.key`);
    const pass = ["-passout", `pass:${passphrase}`];
    const alg = pair.key.includes("BEGIN PRIVATE KEY") && /RSA|rsa/.test(
        await this.#ssl("pkey", "-in", pair.keyPath, "-noout", "-text"),
      )
      ? "rsa"
      : "ec";
    switch (form) {
      case "pkcs1":
      case "sec1":
        await this.#ssl(
          alg,
          "-in",
          pair.keyPath,
          "-out",
          out,
          ...(alg === "rsa" ? ["-traditional"] : []),
        );
        break;
      case "pkcs8":
        await this.#ssl("pkcs8", "-topk8", "-nocrypt", "-in", pair.keyPath, "-out", out);
        break;
      case "pkcs8-enc":
        await this.#ssl(
          "pkcs8",
          "-topk8",
          "-v2",
          "aes-256-cbc",
          "-in",
          pair.keyPath,
          "-out",
          out,
          ...pass,
        );
        break;
      case "legacy-enc":
        await this.#ssl(
          alg,
          "-in",
          pair.keyPath,
          "-aes256",
          ...(alg === "rsa" ? ["-traditional"] : []),
          "-out",
          out,
          ...pass,
        );
        break;
    }
    return await Deno.readTextFile(out);
  }

  /** Writes `text` to a file of this folder with `mode`; returns its path. */
  async file(name: string, text: string, mode = 0o600): Promise<string> {
    const path = join(this.dir, name);
    await Deno.writeTextFile(path, text);
    await Deno.chmod(path, mode);
    return path;
  }

  /** Removes the folder. */
  /** Removes the folder now: for an `unload` listener, which must finish synchronously. */
  removeSync(): void {
    try {
      Deno.removeSync(this.dir, { recursive: true });
    } catch {
      // already gone
    }
  }

  async remove(): Promise<void> {
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }
}

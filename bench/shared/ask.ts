// The suites' own questions to the server (its version, a backend's pid), asked through pgpipe.
import postgres from "../../mod.ts";

/**
 * The first value `text` answers on a fresh plaintext pgpipe connection (the suites' own
 * questions), given to `use` while the connection (its backend) is still open.
 */
export async function ask<T>(url: string, text: string, use = (v: any): T => v) {
  await using sql = postgres(url, { max: 1, ssl: false, onnotice: () => {} });
  const [row] = await sql.unsafe(text);
  return use(Object.values(row)[0]);
}

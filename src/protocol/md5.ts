/** The MD5 password hash PostgreSQL's `md5` method expects. */
import { cryptoModule } from "../builtins.ts";

/** `"md5" + md5(md5(password + user) + salt)`, as hex. */
export function md5Password(user: string, password: string, salt: Uint8Array): string {
  const { createHash } = cryptoModule();
  const inner = createHash("md5").update(password + user, "utf8").digest("hex");
  return "md5" + createHash("md5").update(inner, "utf8").update(salt).digest("hex");
}

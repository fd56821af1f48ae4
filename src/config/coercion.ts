/**
 * Turning the options object's values into strings without throwing from `postgres()`.
 */
import { thrownText } from "../errors.ts";

/**
 * Turns user-supplied option values into strings. A value whose own
 * `toString` throws does not make `postgres()` throw: the first such error is
 * kept as `failure`, and the client rejects every query with it (postgres.js
 * reads these values only when it connects, so that is where its users see
 * such an error). Null and undefined mean "not given".
 */
export class Coercion {
  failure: Error | undefined;

  text(value: unknown): string {
    if (typeof value === "string") return value;
    try {
      return String(value);
    } catch (e) {
      this.failure ??= e instanceof Error ? e : new Error(thrownText(e), { cause: e });
      return "";
    }
  }

  optional(value: unknown): string | undefined {
    return value === undefined || value === null ? undefined : this.text(value);
  }
}

/**
 * What a socket that could not be opened rejects with: Node's code, errno and syscall where the
 * failure is an OS error (Deno names some only by its error class), else CONNECT_FAILED.
 */
import {
  ConnectionError,
  isSocketErrorCode,
  type SocketErrorCode,
  thrownText,
} from "../../errors.ts";
import { type Endpoint, socketPath, type Where } from "./transport.ts";

/** Deno's error classes that carry no `code` of their own. */
const DENO_CODES: Record<string, SocketErrorCode> = {
  ConnectionRefused: "ECONNREFUSED",
  ConnectionReset: "ECONNRESET",
  ConnectionAborted: "ECONNABORTED",
  TimedOut: "ETIMEDOUT",
  NetworkUnreachable: "ENETUNREACH",
  AddrNotAvailable: "EADDRNOTAVAIL",
  NotFound: "ENOENT",
};

/**
 * Node's code, errno and syscall for a socket error from Deno or node:net;
 * null when it is not one. Deno's errors carry the code (or their class
 * names it) and "(os error N)"; a failed name lookup only says so in words.
 */
export function socketErrorInfo(
  e: unknown,
): { code: SocketErrorCode; errno?: number; syscall: string } | null {
  if (!(e instanceof Error)) return null;
  const { code, errno, syscall } = e as { code?: unknown; errno?: unknown; syscall?: unknown };
  if (/failed to lookup address information/i.test(e.message)) {
    // Node's codes for getaddrinfo: EAI_AGAIN when the resolver failed, ENOTFOUND otherwise.
    return /temporary failure/i.test(e.message)
      ? { code: "EAI_AGAIN", errno: -3001, syscall: "getaddrinfo" }
      : { code: "ENOTFOUND", errno: -3008, syscall: "getaddrinfo" };
  }
  const found = typeof code === "string" && isSocketErrorCode(code) ? code : DENO_CODES[e.name];
  if (found === undefined) return null;
  const os = /\(os error (\d+)\)/.exec(e.message);
  return {
    code: found,
    errno: typeof errno === "number" ? errno : os ? -Number(os[1]) : undefined,
    syscall: typeof syscall === "string"
      ? syscall
      : found === "ENOTFOUND"
      ? "getaddrinfo"
      : "connect",
  };
}

/** A socket that could not be opened: Node's code when it is an OS error, else CONNECT_FAILED. */
export function connectFailure(e: unknown, endpoint: Endpoint, where: Where): ConnectionError {
  const unix = endpoint.host.startsWith("/");
  const info = socketErrorInfo(e);
  return new ConnectionError(
    info?.code ?? "CONNECT_FAILED",
    `could not connect to ${
      unix ? socketPath(endpoint.host, endpoint.port) : `${endpoint.host}:${endpoint.port}`
    }: ${thrownText(e)}`,
    { ...where, cause: e, errno: info?.errno, syscall: info?.syscall },
  );
}

// What one cold start sends, for the cold suite's report: the start runs once through a flight
// recorder on loopback (test/harness/flights.ts), which shows the ClientHello's key shares,
// whether the server answered with a HelloRetryRequest (PostgreSQL up to 17 offers one curve,
// prime256v1 by default, so a client that sends only an X25519 share pays a round trip), and
// what each round trip carries.
import { flightRecorder } from "../../test/harness/flights.ts";
import { type KeyExchange, keyExchange } from "../../test/harness/tls_hello.ts";

/** One start seen on the wire. */
export interface SeenStart {
  /** Connections the start opened (more than one: it tried a path, then another). */
  connections: number;
  /** The first connection's key exchange. */
  exchange: KeyExchange;
  /** Its round trips to the first answer, each named by what it carries. */
  trips: string[];
}

/** After the TLS handshake, the encrypted flights of a SCRAM login, in order. */
const LOGIN = ["Finished+startup", "SCRAM first", "SCRAM final", "query"];

/**
 * Names a SCRAM login's client flights: the cleartext ones as recorded, the encrypted ones by
 * their place in the login (each after SCRAM's final message is a query). What ends the
 * connection (the goodbye) and anything after it is left out; when only three encrypted
 * flights remain, the first query rode with SCRAM's final message.
 */
export function loginTrips(flights: string[]): string[] {
  const end = flights.indexOf("goodbye");
  const trips = end < 0 ? flights : flights.slice(0, end);
  const first = trips.findIndex((f) => f.startsWith("encrypted"));
  if (first < 0) return trips;
  const encrypted = trips.length - first;
  return trips.map((f, i) => {
    if (i < first) return f;
    const step = i - first;
    if (encrypted === 3 && step === 2) return "SCRAM final+query";
    return LOGIN[Math.min(step, LOGIN.length - 1)];
  });
}

/** Runs `start` (one fresh client to `url(port)`, ended after its first answer) through a recorder. */
export async function seeStart(
  server: { hostname: string; port: number },
  start: (port: number) => Promise<unknown>,
): Promise<SeenStart> {
  const rec = flightRecorder(server);
  try {
    await start(rec.port);
  } finally {
    await rec.close();
  }
  const exchange = keyExchange(rec.connections[0] ?? []);
  return {
    connections: rec.connections.length,
    exchange,
    trips: loginTrips(exchange.flights),
  };
}

/** A table row: key shares, the server's answer, the round trips and what each carries. */
export function seenRow(seen: SeenStart): string[] {
  const { offer, answer } = seen.exchange;
  const reply = answer === null
    ? "-"
    : answer.retry
    ? `HelloRetryRequest (wants ${answer.group})`
    : `ServerHello (${answer.group})`;
  return [
    offer?.shares.join(", ") ?? "-",
    reply,
    String(seen.trips.length) + (seen.connections > 1 ? ` (${seen.connections} connections)` : ""),
    seen.trips.join(" · "),
  ];
}

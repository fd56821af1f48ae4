// What one cold start sends, for the cold suite's report: the start runs once through a flight
// recorder on loopback (test/harness/flights.ts), which shows the ClientHello's key shares,
// whether the server answered with a HelloRetryRequest (PostgreSQL up to 17 offers one curve,
// prime256v1 by default, so a client that sends only an X25519 share pays a round trip), and
// what each round trip carries.
import { flightRecorder, keyExchange } from "./harness.ts";

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
  return trips.map((f, i) =>
    i < first
      ? f
      : encrypted === 3 && i - first === 2
      ? "SCRAM final+query"
      : LOGIN[Math.min(i - first, 3)]
  );
}

/**
 * Runs `start` (one fresh client to the recorder's port, ended after its first answer) through a
 * recorder; the table row: the first connection's key shares, the server's answer, the round
 * trips to the first answer (and the connections, where the start tried a path, then another)
 * and what each carries.
 */
export async function seenStart(
  server: { hostname: string; port: number },
  start: (port: number) => Promise<unknown>,
) {
  const rec = flightRecorder(server);
  try {
    await start(rec.port);
  } finally {
    await rec.close();
  }
  const { offer, answer, flights } = keyExchange(rec.connections[0] ?? []);
  const trips = loginTrips(flights);
  const reply = answer === null
    ? "-"
    : answer.retry
    ? `HelloRetryRequest (wants ${answer.group})`
    : `ServerHello (${answer.group})`;
  const connections = rec.connections.length > 1 ? ` (${rec.connections.length} connections)` : "";
  const shares = offer?.shares.join(", ") ?? "-";
  return [shares, reply, `${trips.length}${connections}`, trips.join(" · ")];
}

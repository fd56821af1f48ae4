/**
 * The protocol fuzz: sessions of every request kind recorded against a real server (through a
 * loopback proxy that notes, for each answer, how many bytes the client had sent by then), then
 * replayed by a fake server that authenticates the client itself (trust, password, md5 or
 * SCRAM) and mutates exactly one message of what it sends, chosen by a seed. Every case's
 * outcome is classified against what the real server's session gave:
 *
 * - ok: every query settled as it did on the real server;
 * - rejected: some query rejected (and none resolved with something else);
 * - wrong: some query resolved with something other than the real server's answer;
 * - hung: not settled within the configured timeouts (plus a margin);
 * - unhandled: an unhandled promise rejection during the case.
 *
 * A wrong answer is what no driver can see when the mutation changed bytes inside a well-formed
 * message (a value, a tag's count) or an asynchronous message (a notification dropped); from a
 * duplicated, dropped or retyped message, a truncation or a hang-up, it is a bug.
 */
import postgres, { type Options, type Sql } from "../../mod.ts";
import { auth, concat, cstr, encoder, messagesOf, type Peer, typeOf } from "./fake_server.ts";
import { fakeServer } from "./fake_server.ts";
import { b64, scramExpect } from "./scram_server.ts";

// ---------------------------------------------------------------------------------------------
// Seeded randomness (xorshift32), so every case is reproducible from its seed.

export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = (seed >>> 0) || 0x9e3779b9;
  }
  u32(): number {
    let s = this.#s;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return this.#s = s >>> 0;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return n <= 0 ? 0 : this.u32() % n;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }
}

// ---------------------------------------------------------------------------------------------
// Scenarios: what a session runs. Each returns one promise per step; a step's outcome is its
// value (normalised to JSON) or its error's code.

/** A session's steps. */
export type Scenario = (sql: Sql, notes: string[]) => Promise<unknown>[];

/** A result as plain JSON: rows, and the count and command of a Result. */
function plain(v: unknown): unknown {
  if (Array.isArray(v)) {
    const r = v as unknown[] & { count?: unknown; command?: unknown };
    return { rows: r.map(plain), count: r.count ?? null, command: r.command ?? null };
  }
  if (v instanceof Uint8Array) return Array.from(v);
  return v;
}

const after = (p: Promise<unknown>, next: () => Promise<unknown>) =>
  p.then(next, next) as Promise<unknown>;

/** Every request kind: extended and simple queries, batches, cursor, COPY, LISTEN, describe. */
export const SCENARIOS: Record<string, Scenario> = {
  extended: (sql) => [
    sql`select g + ${10}::int as n, ${"x"}::text as t from generate_series(1, 3) g`,
    sql`select ${null}::int as n`.values(),
    sql`select 1/0 as boom`,
    sql`select ${"again"}::text as t`,
  ],
  simple: (sql) => [
    sql.unsafe("select 1 as a; select 'b' as b union all select 'c'; set local work_mem = '4MB'"),
    sql.unsafe(""),
    sql.unsafe("select 'one' as x"),
  ],
  describe: (sql) => [
    sql`select ${1}::int as n, ${"a"}::text as t`.describe().then((d) => ({
      columns: d.columns.map((c) => c.name),
      types: d.types,
    })),
    sql`select ${2}::int as n`,
  ],
  transaction: (sql) => {
    const tx = sql.begin((tx) => [
      tx`select ${1}::int as n`,
      tx`select g from generate_series(1, 3) g`,
      tx`insert into pg_temp.none select 1`.catch(() => "skipped"),
    ]);
    return [tx, after(tx, () => sql`select ${"after"}::text as t`)];
  },
  batch_error: (sql) => {
    const tx = sql.begin((tx) => [tx`select ${1}::int as n`, tx`select 1/0`, tx`select 3 as n`]);
    return [tx, after(tx, () => sql`select ${"after"}::text as t`)];
  },
  cursor: (sql) => [
    (async () => {
      const out: unknown[] = [];
      for await (const rows of sql`select g from generate_series(1, 5) g`.cursor(2)) {
        out.push(rows.map((r) => r.g));
      }
      return out;
    })(),
  ],
  copy: (sql) => {
    // Each step only once the one before succeeded: after a failure, the pool's reconnects to
    // the fake server (which replays one session) would only wait out connect_timeout.
    const made = sql`create temp table fuzz_copy (n int, t text)`;
    const into = made.then(() => sql.copyFrom("fuzz_copy", [[1, "a"], [2, "b"], [3, null]]));
    const text = into.then(async () => {
      const chunks: string[] = [];
      const stream = await sql`copy fuzz_copy to stdout`.readable();
      for await (const c of stream) chunks.push(new TextDecoder().decode(c as Uint8Array));
      return chunks.join("");
    });
    const binary = text.then(async () => {
      const out: unknown[] = [];
      for await (const rows of sql.copyTo("fuzz_copy")) out.push(rows);
      return out;
    });
    return [made, into, text, binary];
  },
  listen: (sql, notes) => {
    const listen = sql.unsafe("listen fuzz_channel");
    const notify = listen.then(() => sql`select pg_notify('fuzz_channel', ${"hello"})`);
    return [listen, notify, notify.then(() => [...notes])];
  },
};

/** What one step did: its value as JSON, or its error's code. */
type StepOutcome = { ok: string } | { error: string };

async function settle(steps: Promise<unknown>[]): Promise<StepOutcome[]> {
  const settled = await Promise.allSettled(steps);
  return settled.map((s) =>
    s.status === "fulfilled" ? { ok: JSON.stringify(plain(s.value)) ?? "undefined" } : {
      error: String((s.reason as { code?: unknown })?.code ?? s.reason),
    }
  );
}

// ---------------------------------------------------------------------------------------------
// Recording

/** A server's side of one recorded session. */
export interface Recording {
  /** After AuthenticationOk up to the first ReadyForQuery (parameters, key data). */
  startup: Uint8Array[];
  /** The rest, each with the number of client messages (after startup) it answered. */
  messages: { bytes: Uint8Array; after: number }[];
  /** What each step did on the real server. */
  expected: StepOutcome[];
}

/** The client options every session uses (on the real server and the fake one). */
function clientOptions(notes: string[], extra: Options): Options {
  return {
    max: 1,
    ssl: "disable",
    connect_timeout: 1,
    query_timeout: 1,
    onnotice: () => {},
    onnotify: (n) => notes.push(`${n.channel}:${n.payload}`),
    ...extra,
  };
}

async function pump(
  from: Deno.Conn,
  to: Deno.Conn,
  seen: (chunk: Uint8Array) => void,
): Promise<void> {
  const buf = new Uint8Array(65536);
  try {
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      const chunk = buf.slice(0, n);
      seen(chunk);
      for (let off = 0; off < n;) off += await to.write(chunk.subarray(off));
    }
  } catch {
    // either side closed
  }
  try {
    to.close();
  } catch {
    // already closed
  }
}

/** Runs `scenario` against the real server at `url` (trust) through a recording proxy. */
export async function record(url: string, scenario: Scenario): Promise<Recording> {
  const target = new URL(url.replace(/^postgres(ql)?:/, "http:"));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const chunks: { bytes: Uint8Array; after: number }[] = [];
  let client = 0; // messages the client sent after its StartupMessage
  let pending: Uint8Array = new Uint8Array(0); // the client's bytes not yet a whole message
  let started = false;
  const pumps: Promise<void>[] = [];
  const accepting = (async () => {
    let first = true;
    for await (const conn of listener) {
      const server = await Deno.connect({
        hostname: target.hostname,
        port: Number(target.port || 5432),
      });
      const recorded = first;
      first = false;
      pumps.push(
        pump(conn, server, (chunk) => {
          if (!recorded) return;
          pending = concat(pending, chunk);
          const view = () => new DataView(pending.buffer, pending.byteOffset);
          if (!started && pending.length >= 4) {
            const n = view().getInt32(0);
            if (pending.length < n) return;
            pending = pending.slice(n);
            started = true;
          }
          while (started && pending.length >= 5 && pending.length >= 1 + view().getInt32(1)) {
            if (pending[0] !== 0x70) client++; // 'p' (authentication) is not counted
            pending = pending.slice(1 + view().getInt32(1));
          }
        }),
        pump(server, conn, (chunk) => {
          if (recorded) chunks.push({ bytes: chunk, after: client });
        }),
      );
    }
  })();
  const notes: string[] = [];
  const u = new URL(url.replace(/^postgres(ql)?:/, "http:"));
  const sql = postgres({
    ...clientOptions(notes, {}),
    host: "127.0.0.1",
    port: (listener.addr as Deno.NetAddr).port,
    user: decodeURIComponent(u.username),
    database: decodeURIComponent(u.pathname.slice(1)),
    password: decodeURIComponent(u.password) || undefined,
  });
  let expected: StepOutcome[];
  try {
    expected = await settle(scenario(sql, notes));
  } finally {
    await sql.end({ timeout: 1 });
    listener.close();
    await accepting.catch(() => {});
    await Promise.all(pumps);
  }
  // Split into messages, each tagged with the client's count when its first byte came.
  const all = concat(...chunks.map((c) => c.bytes));
  const tags: number[] = [];
  for (const c of chunks) for (let i = 0; i < c.bytes.length; i++) tags.push(c.after);
  const messages: { bytes: Uint8Array; after: number }[] = [];
  let at = 0;
  for (const m of messagesOf(all)) {
    messages.push({ bytes: m, after: tags[at] });
    at += m.length;
  }
  const ready = messages.findIndex((m) => typeOf(m.bytes) === "Z");
  return {
    startup: messages.slice(1, ready + 1).map((m) => m.bytes), // without AuthenticationOk
    messages: messages.slice(ready + 1),
    expected,
  };
}

// ---------------------------------------------------------------------------------------------
// Mutations

/** How one message is broken. */
export const MUTATIONS = [
  "bitflip",
  "byte",
  "length",
  "inner",
  "truncate",
  "duplicate",
  "drop",
  "retype",
  "garbage",
  "close",
] as const;
/** One of {@link MUTATIONS}. */
export type Mutation = typeof MUTATIONS[number];

/** Mutations that leave every message that arrives well-formed and unchanged inside. */
export const STRUCTURAL: ReadonlySet<Mutation> = new Set([
  "truncate",
  "duplicate",
  "drop",
  "retype",
  "close",
]);

/** The backend message types (a retyped message becomes another of them). */
const TYPES = "R K 2 3 C d c G H W D I E v n N A t S 1 s Z T".split(" ");
/** Messages the server may send at any time: their loss no driver can notice. */
const ASYNC = new Set(["N", "S", "A"]);

interface Broken {
  bytes: Uint8Array;
  close: boolean;
}

function breakMessage(rng: Rng, kind: Mutation, m: Uint8Array): Broken {
  const copy = m.slice();
  const view = new DataView(copy.buffer);
  switch (kind) {
    case "bitflip": {
      const i = rng.int(copy.length);
      copy[i] ^= 1 << rng.int(8);
      return { bytes: copy, close: false };
    }
    case "byte":
      copy[rng.int(copy.length)] = rng.int(256);
      return { bytes: copy, close: false };
    case "length": {
      const len = view.getInt32(1);
      const choices = [len - 1, len + 1, len - 4, len + 4, 0, 3, 0x7fffffff, rng.u32() | 0];
      view.setInt32(1, rng.pick(choices));
      return { bytes: copy, close: false };
    }
    case "inner": {
      if (copy.length < 7) return { bytes: copy, close: false };
      const at = 5 + rng.int(copy.length - 6);
      const value = rng.pick([0, -1, 1, 0x7fff, -2]);
      if (at + 4 <= copy.length && rng.int(2) === 0) view.setInt32(at, value);
      else view.setInt16(at, value);
      return { bytes: copy, close: false };
    }
    case "truncate":
      return { bytes: copy.subarray(0, rng.int(copy.length)), close: true };
    case "duplicate":
      return { bytes: concat(m, m), close: false };
    case "drop":
      return { bytes: new Uint8Array(0), close: false };
    case "retype": {
      const others = TYPES.filter((t) => t !== typeOf(m));
      copy[0] = rng.pick(others).charCodeAt(0);
      return { bytes: copy, close: false };
    }
    case "garbage": {
      const junk = new Uint8Array(1 + rng.int(16));
      for (let i = 0; i < junk.length; i++) junk[i] = rng.int(256);
      return { bytes: concat(junk, m), close: false };
    }
    case "close":
      return { bytes: new Uint8Array(0), close: true };
  }
}

// ---------------------------------------------------------------------------------------------
// Replay

/** How the fake server authenticates the client before the recorded startup. */
export const AUTH_METHODS = ["trust", "password", "md5", "scram"] as const;
/** One of {@link AUTH_METHODS}. */
export type AuthMethod = typeof AUTH_METHODS[number];

/** Messages the server sends to authenticate, AuthenticationOk included. */
const AUTH_MESSAGES: Record<AuthMethod, number> = { trust: 1, password: 2, md5: 2, scram: 4 };

const PASSWORD = "fuzz-password";
/** Client silence after which the replay goes on anyway (a mutation changed what it sends). */
const QUIET_MS = 150;

/**
 * What the client sends after its StartupMessage: its messages counted as the recording counted
 * them (messages, not bytes: statement names differ from one connection to the next).
 */
class ClientSide {
  count = 0;
  closed = false;
  #passwords: Uint8Array[] = [];
  #wake: (() => void) | null = null;
  #astray = false;

  constructor(readonly peer: Peer) {}

  async run(): Promise<void> {
    try {
      for (;;) {
        const m = await this.peer.message();
        if (m.type === "p") this.#passwords.push(m.body);
        else this.count++;
        if (m.type === "X") break;
        this.#poke();
      }
    } catch {
      // closed
    }
    this.closed = true;
    this.#poke();
  }

  #poke(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /** Waits for something from the client, at most QUIET_MS; false when it stayed quiet. */
  #heard(): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#wake = null;
        resolve(false);
      }, QUIET_MS);
      this.#wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
  }

  /** The next password message, or null if none comes in time. */
  async password(): Promise<Uint8Array | null> {
    while (this.#passwords.length === 0 && !this.closed) {
      if (!(await this.#heard())) return null;
    }
    return this.#passwords.shift() ?? null;
  }

  /**
   * Waits until the client sent `count` messages, or closed. Once it stayed quiet instead (what
   * it was sent made it stop early), it is not waited for again: the rest goes at once.
   */
  async reached(count: number): Promise<void> {
    while (this.count < count && !this.closed && !this.#astray) {
      if (!(await this.#heard())) this.#astray = true;
    }
  }

  /** Waits for the client to close, or to stay quiet. */
  async done(): Promise<void> {
    while (!this.closed) if (!(await this.#heard())) return;
  }
}

/** One case: which recording, how the client authenticates, and which message breaks how. */
export interface FuzzCase {
  scenario: string;
  auth: AuthMethod;
  mutation: Mutation | null;
  /** Index of the message broken among all the server sends; ignored without a mutation. */
  at: number;
  /** Seeds what the mutation does to the message. */
  seed: number;
}

/** What a case did. */
export interface CaseOutcome {
  verdict: "ok" | "rejected" | "wrong" | "hung" | "unhandled";
  /** The type letter of the message broken (null: none was). */
  broken: string | null;
  detail: string;
}

/** Serves one recording on one connection, breaking message `c.at` as `c.mutation` says. */
async function replay(peer: Peer, rec: Recording, c: FuzzCase, seen: { type: string }) {
  const rng = new Rng(c.seed);
  const client = new ClientSide(peer);
  let index = 0;
  let closed = false;
  const emit = async (m: Uint8Array): Promise<void> => {
    if (closed) return;
    if (c.mutation === null || index++ !== c.at) return void await peer.send(m);
    seen.type = typeOf(m);
    const broken = breakMessage(rng, c.mutation, m);
    if (broken.bytes.length > 0) await peer.send(broken.bytes);
    if (broken.close) {
      if (c.mutation === "close") await new Promise((r) => setTimeout(r, 20));
      closed = true;
      peer.close();
    }
  };
  const reading = client.run();
  try {
    switch (c.auth) {
      case "password":
      case "md5": {
        await emit(
          c.auth === "md5" ? auth(5, new Uint8Array([1, 2, 3, 4])) : auth(3),
        );
        if (await client.password() === null) return;
        break;
      }
      case "scram": {
        await emit(auth(10, cstr("SCRAM-SHA-256"), cstr("")));
        const initial = await client.password();
        if (initial === null) return;
        const text = new TextDecoder().decode(initial.subarray(initial.indexOf(0) + 5));
        const bare = text.slice(text.indexOf(",", text.indexOf(",") + 1) + 1);
        const nonce = /r=([^,]*)/.exec(bare)?.[1] ?? "";
        const salt = new Uint8Array(16).fill(7);
        const first = `r=${nonce}replay,s=${b64(salt)},i=4096`;
        await emit(auth(11, encoder.encode(first)));
        const final = await client.password();
        if (final === null) return;
        const finalText = new TextDecoder().decode(final);
        const withoutProof = finalText.slice(0, finalText.lastIndexOf(",p="));
        const { serverSignature } = await scramExpect(
          PASSWORD,
          salt,
          4096,
          `${bare},${first},${withoutProof}`,
        );
        await emit(auth(12, encoder.encode(`v=${serverSignature}`)));
        break;
      }
    }
    await emit(auth(0));
    for (const m of rec.startup) await emit(m);
    for (const m of rec.messages) {
      await client.reached(m.after);
      if (client.closed) return;
      await emit(m.bytes);
    }
    await client.done();
  } catch {
    // the client hung up
  } finally {
    peer.close();
    await reading;
  }
}

/**
 * Milliseconds after which a case still unsettled hangs: a step may wait out connect_timeout
 * (1 s, the pool retrying a server that went away) and query_timeout twice (1 s, then the
 * connection is destroyed), and at most two steps do (one after a failure); then a margin.
 */
const HANG_MS = 10_000;

/** Runs one case against a fake server replaying `rec`. */
export async function runCase(
  rec: Recording,
  scenario: Scenario,
  c: FuzzCase,
  unhandled: unknown[],
): Promise<CaseOutcome> {
  const seen = { type: "" };
  let sessions = 0;
  const server = fakeServer(async (peer) => {
    const length = await peer.int32();
    const code = await peer.int32();
    if (code !== 196608) return peer.close(); // a CancelRequest, or anything else
    await peer.take(length - 8);
    if (sessions++ > 0) return peer.close(); // only the recorded session is replayed
    await replay(peer, rec, c, seen);
  });
  const notes: string[] = [];
  const sql = postgres({
    ...clientOptions(notes, {}),
    host: "127.0.0.1",
    port: server.port,
    user: "fuzz",
    database: "fuzz",
    password: PASSWORD,
  });
  const before = unhandled.length;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const outcome = await Promise.race([
      settle(scenario(sql, notes)),
      new Promise<null>((resolve) => timer = setTimeout(() => resolve(null), HANG_MS)),
    ]);
    clearTimeout(timer);
    // Let a rejection nobody handled surface before judging.
    await new Promise((r) => setTimeout(r, 0));
    const broken = c.mutation === null ? null : seen.type || null;
    if (outcome === null) return { verdict: "hung", broken, detail: "" };
    if (unhandled.length > before) {
      return { verdict: "unhandled", broken, detail: String(unhandled[unhandled.length - 1]) };
    }
    let verdict: CaseOutcome["verdict"] = "ok";
    let detail = "";
    for (let i = 0; i < outcome.length; i++) {
      const got = outcome[i];
      const want = rec.expected[i];
      if ("ok" in got) {
        if (!("ok" in want) || got.ok !== want.ok) {
          verdict = "wrong";
          detail = `step ${i}: ${got.ok.slice(0, 200)} where the server gave ${
            JSON.stringify(want).slice(0, 200)
          }`;
          break;
        }
      } else if (!("error" in want) || got.error !== want.error) {
        verdict = "rejected";
        detail ||= `step ${i}: ${got.error}`;
      }
    }
    return { verdict, broken, detail };
  } finally {
    clearTimeout(timer);
    await sql.end({ timeout: 0.5 }).catch(() => {});
    await server.close();
  }
}

/** Whether a wrong answer in this case is a bug (see the module's comment). */
export function wrongIsBug(c: FuzzCase, o: CaseOutcome): boolean {
  return o.verdict === "wrong" && c.mutation !== null && STRUCTURAL.has(c.mutation) &&
    !(o.broken !== null && ASYNC.has(o.broken));
}

/** The number of messages a case's server sends: where a mutation may land. */
export function messageCount(rec: Recording, method: AuthMethod): number {
  return AUTH_MESSAGES[method] + rec.startup.length + rec.messages.length;
}

/** The outcome table: per mutation, how many cases had each verdict. */
export type Table = Record<string, Record<CaseOutcome["verdict"], number>>;

/** Draws `count` cases from `seed` over the recordings and runs them, `parallel` at a time. */
export async function fuzz(
  recordings: Record<string, Recording>,
  seed: number,
  count: number,
  parallel = 6,
): Promise<{ table: Table; bugs: string[] }> {
  const rng = new Rng(seed);
  const names = Object.keys(recordings);
  const cases: FuzzCase[] = [];
  for (let i = 0; i < count; i++) {
    const scenario = rng.pick(names);
    const method = rng.pick(AUTH_METHODS);
    cases.push({
      scenario,
      auth: method,
      mutation: rng.pick(MUTATIONS),
      at: rng.int(messageCount(recordings[scenario], method)),
      seed: rng.u32(),
    });
  }
  const table: Table = {};
  const bugs: string[] = [];
  const unhandled: unknown[] = [];
  const onUnhandled = (e: PromiseRejectionEvent) => {
    e.preventDefault();
    unhandled.push(e.reason);
  };
  globalThis.addEventListener("unhandledrejection", onUnhandled);
  try {
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++];
        const o = await runCase(recordings[c.scenario], SCENARIOS[c.scenario], c, unhandled);
        const row = table[c.mutation!] ??= { ok: 0, rejected: 0, wrong: 0, hung: 0, unhandled: 0 };
        row[o.verdict]++;
        if (
          o.verdict === "hung" || o.verdict === "unhandled" || wrongIsBug(c, o)
        ) bugs.push(`${JSON.stringify(c)} (${o.broken}): ${o.verdict} ${o.detail}`);
      }
    };
    await Promise.all(Array.from({ length: parallel }, worker));
  } finally {
    globalThis.removeEventListener("unhandledrejection", onUnhandled);
  }
  return { table, bugs };
}

/** Records every scenario against the server at `url`. */
export async function recordAll(url: string): Promise<Record<string, Recording>> {
  const out: Record<string, Recording> = {};
  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    out[name] = await record(url, scenario);
  }
  return out;
}

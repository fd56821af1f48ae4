// Draws docs/waterfall.svg from a real exported trace: the same Deno.serve handler's four queries
// awaited one by one, then issued together (pipelined on one connection), each through a proxy
// that delays every packet 2 ms each way (a database in a nearby region). The handler runs in a
// child process with OTEL_DENO=true, exporting OTLP/HTTP JSON to a receiver here; the picture is
// the request spans and their query spans on one time axis.
//
//   DATABASE_URL=postgres://... deno run -A docs/waterfall.ts     write docs/waterfall.svg
import postgres from "../mod.ts";
import { startDelayProxy } from "../bench/shared/proxy.ts";
import { otelEnv, type ReceivedSpan, startOtlpReceiver } from "../test/harness/otlp_receiver.ts";
import { escape, formatted } from "./chart.ts";

const OUT = new URL("./waterfall.svg", import.meta.url);
const DELAY_MS = 2;

/** The handler's queries: what a page showing one user might need. */
const queries = (sql: ReturnType<typeof postgres>, id: number) => [
  sql`select rolname, rolsuper from pg_roles where oid = ${id}`,
  sql`select count(*)::int as n from pg_class where relowner = ${id}`,
  sql`select nspname from pg_namespace where nspowner = ${id} order by nspname limit 5`,
  sql`select datname from pg_database where datdba = ${id} limit 5`,
];

/** The child: a server with the two handlers, each requested once (after a warm-up). */
async function app(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, fetch_types: false });
  const handlers: Record<string, () => Promise<unknown>> = {
    "/warm": () => Promise.all(queries(sql, 10)), // connect and prepare outside the picture
    "/serial": async () => {
      for (const q of queries(sql, 10)) await q;
    },
    "/pipelined": () => Promise.all(queries(sql, 10)),
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    await handlers[new URL(req.url).pathname]();
    return new Response("ok");
  });
  for (const path of Object.keys(handlers)) {
    await (await fetch(`http://127.0.0.1:${server.addr.port}${path}`)).text();
  }
  await server.shutdown();
  await sql.end();
}

interface Lane {
  title: string;
  request: ReceivedSpan;
  queries: ReceivedSpan[];
}

const ms = (ns: bigint) => Number(ns) / 1e6;

/** Two waterfalls on one time axis: the request span, then its query spans, one row each. */
export function render(lanes: Lane[]): string {
  const width = 760;
  const left = 150;
  const right = 60;
  const row = 18;
  const longest = Math.max(...lanes.map((l) => ms(l.request.end - l.request.start)));
  const step = [1, 2, 5, 10, 20].find((s) => longest / s <= 10) ?? 50;
  const axisMax = Math.ceil(longest / step) * step;
  const x = (t: number) => left + (t / axisMax) * (width - left - right);
  let y = 64;
  const out: string[] = [];
  const body: string[] = [];
  for (const lane of lanes) {
    const t0 = lane.request.start;
    body.push(
      `<text x="12" y="${y + 12}" font-weight="600" fill="#111827">${escape(lane.title)}</text>`,
    );
    y += 20;
    const bars = [lane.request, ...lane.queries.toSorted((a, b) => Number(a.start - b.start))];
    bars.forEach((span, i) => {
      const start = ms(span.start - t0);
      const end = ms(span.end - t0);
      const label = i === 0 ? `${span.name} ${span.attributes["url.path"]}` : span.name;
      const color = i === 0 ? "#9ca3af" : "#0f766e";
      body.push(
        `<text x="${left - 8}" y="${y + 12}" text-anchor="end" fill="#374151">${
          escape(label)
        }</text>`,
        `<rect x="${x(start).toFixed(1)}" y="${y + 2}" width="${
          Math.max(1, x(end) - x(start)).toFixed(1)
        }" height="${row - 5}" rx="2" fill="${color}"><title>${
          escape(`${label}: ${start.toFixed(2)} to ${end.toFixed(2)} ms`)
        }</title></rect>`,
        `<text x="${(x(end) + 5).toFixed(1)}" y="${y + 12}" fill="#6b7280">${
          (end - start).toFixed(1)
        } ms</text>`,
      );
      y += row;
    });
    y += 14;
  }
  const height = y + 28;
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="12" y="22" font-size="15" font-weight="600" fill="#111827">` +
      `One handler, four queries: awaited in turn, then pipelined</text>`,
    `<text x="12" y="42" fill="#4b5563">Spans exported by Deno (OTEL_DENO=true) with pgpipe's ` +
      `query spans under the Deno.serve request span; ${DELAY_MS} ms each way to the database.</text>`,
  );
  for (let t = 0; t <= axisMax; t += step) {
    out.push(
      `<line x1="${x(t)}" y1="60" x2="${x(t)}" y2="${height - 24}" stroke="#e5e7eb"/>`,
      `<text x="${x(t)}" y="${height - 10}" text-anchor="middle" fill="#6b7280">${t} ms</text>`,
    );
  }
  out.push(...body, "</svg>");
  return out.join("\n") + "\n";
}

if (import.meta.main) {
  if (Deno.args[0] === "--app") {
    await app(Deno.args[1]);
  } else {
    const url = new URL(Deno.env.get("DATABASE_URL") ?? Deno.env.get("PGPIPE_BENCH_URL") ?? "");
    if (!url.host) throw new Error("set DATABASE_URL to the database to trace");
    const proxy = startDelayProxy({ hostname: url.hostname, port: Number(url.port) }, DELAY_MS);
    const receiver = startOtlpReceiver();
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const child = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", new URL(import.meta.url).pathname, "--app", url.href],
      env: otelEnv(receiver),
    }).output();
    await proxy.close();
    await receiver.close();
    if (!child.success) throw new Error(new TextDecoder().decode(child.stderr));
    const lanes = ["/serial", "/pipelined"].map((path) => {
      const request = receiver.spans.find((s) => s.kind === 2 && s.attributes["url.path"] === path);
      if (request === undefined) throw new Error(`no request span for ${path}`);
      const queries = receiver.spans.filter((s) =>
        s.scope === "pgpipe" && s.parentSpanId === request.spanId
      );
      return { title: path === "/serial" ? "awaited in turn" : "pipelined", request, queries };
    });
    await Deno.writeTextFile(OUT, await formatted(render(lanes)));
    console.log(`wrote ${OUT.pathname}`);
  }
}

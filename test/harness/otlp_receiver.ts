// A small OTLP/HTTP receiver on loopback, for the JSON encoding (OTEL_EXPORTER_OTLP_PROTOCOL=
// http/json): Deno's exporter posts to /v1/traces, /v1/metrics and /v1/logs; spans and metric
// points are kept, flattened, so a test can look them up by name and attribute.

/** An OTLP attribute value, as the JSON encoding writes it. */
interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

type Attrs = Record<string, string | number | boolean>;

/** One exported span. */
export interface ReceivedSpan {
  scope: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  kind: number;
  start: bigint;
  end: bigint;
  attributes: Attrs;
  events: { name: string; attributes: Attrs }[];
  status: { code: number; message?: string };
}

/** One exported metric data point. */
export interface ReceivedPoint {
  scope: string;
  metric: string;
  attributes: Attrs;
  /** Sum or gauge value, or a histogram's count. */
  value: number;
  /** A histogram's sum. */
  sum?: number;
}

function attrs(list: { key: string; value: AnyValue }[] | undefined): Attrs {
  const out: Attrs = {};
  for (const { key, value } of list ?? []) {
    out[key] = value.stringValue ?? value.boolValue ??
      (value.intValue !== undefined ? Number(value.intValue) : value.doubleValue ?? "");
  }
  return out;
}

/** A running receiver: where to point the exporter, and what it received. */
export interface OtlpReceiver {
  /** `http://127.0.0.1:PORT`, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  endpoint: string;
  spans: ReceivedSpan[];
  points: ReceivedPoint[];
  /** The points of each metrics export, in the order they arrived. */
  exports: ReceivedPoint[][];
  /** Request bodies received, by path. */
  posts: Map<string, number>;
  close(): Promise<void>;
}

// deno-lint-ignore no-explicit-any
type Json = any;

function collectSpans(body: Json, into: ReceivedSpan[]): void {
  for (const rs of body.resourceSpans ?? []) {
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        into.push({
          scope: ss.scope?.name ?? "",
          name: s.name,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          kind: s.kind,
          start: BigInt(s.startTimeUnixNano),
          end: BigInt(s.endTimeUnixNano),
          attributes: attrs(s.attributes),
          events: (s.events ?? []).map((e: Json) => ({
            name: e.name,
            attributes: attrs(e.attributes),
          })),
          status: { code: s.status?.code ?? 0, message: s.status?.message },
        });
      }
    }
  }
}

function collectPoints(body: Json, into: ReceivedPoint[]): void {
  for (const rm of body.resourceMetrics ?? []) {
    for (const sm of rm.scopeMetrics ?? []) {
      for (const m of sm.metrics ?? []) {
        const data = m.histogram ?? m.sum ?? m.gauge;
        for (const p of data?.dataPoints ?? []) {
          into.push({
            scope: sm.scope?.name ?? "",
            metric: m.name,
            attributes: attrs(p.attributes),
            value: Number(p.count ?? p.asInt ?? p.asDouble ?? 0),
            sum: p.sum,
          });
        }
      }
    }
  }
}

/** Starts a receiver on 127.0.0.1 (a free port); `keep: false` only counts what arrives. */
export function startOtlpReceiver(keep = true): OtlpReceiver {
  const spans: ReceivedSpan[] = [];
  const points: ReceivedPoint[] = [];
  const exports: ReceivedPoint[][] = [];
  const posts = new Map<string, number>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    posts.set(path, (posts.get(path) ?? 0) + 1);
    if (keep && path === "/v1/traces") collectSpans(JSON.parse(text), spans);
    if (keep && path === "/v1/metrics") {
      const batch: ReceivedPoint[] = [];
      collectPoints(JSON.parse(text), batch);
      points.push(...batch);
      exports.push(batch);
    }
    return new Response("{}", { headers: { "content-type": "application/json" } });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    spans,
    points,
    exports,
    posts,
    close: () => server.shutdown(),
  };
}

/** The environment that makes a child Deno export to `receiver` as JSON, metrics every 200 ms. */
export function otelEnv(receiver: OtlpReceiver): Record<string, string> {
  return {
    OTEL_DENO: "true",
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_METRIC_EXPORT_INTERVAL: "200",
    OTEL_SERVICE_NAME: "pgpipe-test",
  };
}

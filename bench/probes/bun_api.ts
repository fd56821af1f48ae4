// The little of Bun's API the bun probes use, declared for Deno, which type-checks them too,
// and the global `Bun` as that type (the probes run under bun only).

/** A Bun.sql client: a tagged template resolving to row objects, and its end. */
export interface BunSql {
  (strings: TemplateStringsArray, ...values: unknown[]): Promise<Record<string, any>[]>;
  close(options?: { timeout?: number }): Promise<void>;
}

/** Bun.serve's options. */
type ServeOptions = {
  hostname: string;
  port: number;
  development: boolean;
  fetch(req: Request): Promise<Response>;
};

/** The global `Bun`. */
export interface BunApi {
  argv: string[];
  SQL: new (url: string, options?: { max: number }) => BunSql;
  file(path: string): Blob;
  serve(options: ServeOptions): { port: number; stop(): Promise<void> | void };
  stdin: { stream(): ReadableStream<Uint8Array> };
}

/** The global `Bun`, typed. */
export const Bun = (globalThis as unknown as { Bun: BunApi }).Bun;

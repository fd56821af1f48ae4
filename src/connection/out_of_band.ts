/**
 * The messages the server may send at any time, not as part of a request's answer: notices,
 * parameter changes and notifications, routed by type (never by position in the FIFO) to the
 * connection's parameters and the user's hooks, which are called guarded.
 */
import {
  Backend,
  cstrPair,
  type FieldMap,
  fields,
  type Notification,
  notification,
} from "../protocol/backend.ts";

/** The user's hooks for what the server reports on its own. */
export interface ServerHooks {
  /** Called for each NoticeResponse. */
  onnotice?: (notice: FieldMap) => void;
  /** Called for each ParameterStatus after startup too. */
  onparameter?: (name: string, value: string) => void;
  /** Called for each NotificationResponse. */
  onnotify?: (n: Notification) => void;
}

/**
 * Calls a user's hook from the read loop. What it throws must not take the
 * connection down (nor be lost), so it is reported on the console.
 */
function callHook<A extends unknown[]>(
  name: string,
  hook: ((...args: A) => void) | undefined,
  ...args: A
): void {
  if (hook === undefined) return;
  try {
    hook(...args);
  } catch (e) {
    console.error(`pgpipe: the ${name} callback threw`, e);
  }
}

/** Routes a connection's notices, parameter changes and notifications. */
export class ServerReports {
  readonly #parameters: Map<string, string>;
  readonly #hooks: ServerHooks;

  constructor(parameters: Map<string, string>, hooks: ServerHooks) {
    this.#parameters = parameters;
    this.#hooks = hooks;
  }

  /** A NoticeResponse's fields. */
  notice(f: FieldMap): void {
    callHook("onnotice", this.#hooks.onnotice, f);
  }

  /** A ParameterStatus, during startup (as postgres.js reports it) or later. */
  parameter(name: string, value: string): void {
    this.#parameters.set(name, value);
    callHook("onparameter", this.#hooks.onparameter, name, value);
  }

  /**
   * A NoticeResponse, ParameterStatus or NotificationResponse in `buf[start, end)`, as the read
   * loop framed it.
   */
  route(type: number, buf: Uint8Array, start: number, end: number): void {
    switch (type) {
      case Backend.NoticeResponse:
        return this.notice(fields(buf, start, end));
      case Backend.ParameterStatus: {
        const [name, value] = cstrPair(buf, start, end);
        return this.parameter(name, value);
      }
      case Backend.NotificationResponse:
        return callHook("onnotify", this.#hooks.onnotify, notification(buf, start, end));
    }
  }
}

/**
 * The part of the web `Headers`, `Request` and `Response` classes that the daemon's Hono app and
 * `serve()` use, small enough to leave Node's own implementation unloaded. Node's web classes are
 * its bundled undici, which costs the daemon's process about 8 MiB of resident memory once any of
 * them is touched (measured: `bench:daemon --rss-binary`, 60.2 → 68.2 MiB), against a 64 MiB goal.
 * Under Node the daemon puts these in place of the global ones before it serves
 * ({@link useLightWebClasses}), as Hono's own Node adapter puts its lightweight `Response` in
 * place; under Deno (tests, development) the runtime's classes serve, and a test holds both to the
 * same bytes on the wire.
 *
 * What is here: headers as a case-insensitive, sorted list (combined with ", ", `Set-Cookie` kept
 * apart), a request of a URL, method, headers and signal, and a response of a status and a whole
 * body (text or bytes). Streams, `FormData`, `Blob` and request bodies are not: the daemon neither
 * receives nor sends them.
 *
 * @module
 */
import { Buffer } from "node:buffer";

/** The init forms of {@link LightHeaders}: a record, pairs, or another headers object. */
export type LightHeadersInit =
  | Record<string, string>
  | readonly (readonly [string, string])[]
  | { forEach(callback: (value: string, key: string) => void): void };

const TOKEN_REGEXP = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const EDGE_WHITESPACE_REGEXP = /^[\t\n\r ]+|[\t\n\r ]+$/g;

function headerName(name: string): string {
  if (!TOKEN_REGEXP.test(name)) throw new TypeError(`Invalid header name: '${name}'`);
  return name.toLowerCase();
}

function headerValue(value: string): string {
  const normalized = String(value).replace(EDGE_WHITESPACE_REGEXP, "");
  if (/[\0\r\n]/.test(normalized)) throw new TypeError("Invalid header value");
  return normalized;
}

/** HTTP header fields, as the web `Headers` class keeps them. */
export class LightHeaders {
  readonly #fields = new Map<string, string[]>();

  constructor(init?: LightHeadersInit) {
    if (init === undefined) return;
    if (Array.isArray(init)) {
      for (const [name, value] of init as readonly (readonly [string, string])[]) {
        this.append(name, value);
      }
    } else if (typeof (init as { forEach?: unknown }).forEach === "function") {
      const other = init as { forEach(cb: (v: string, k: string) => void): void };
      const cookies = (init as { getSetCookie?: () => string[] }).getSetCookie?.();
      other.forEach((value, key) => {
        if (key !== "set-cookie" || cookies === undefined) this.append(key, value);
      });
      for (const cookie of cookies ?? []) this.append("set-cookie", cookie);
    } else {
      for (const [name, value] of Object.entries(init)) this.append(name, value);
    }
  }

  /** Adds a value to a field. */
  append(name: string, value: string): void {
    const key = headerName(name);
    const values = this.#fields.get(key);
    if (values) values.push(headerValue(value));
    else this.#fields.set(key, [headerValue(value)]);
  }

  /** Replaces a field's values. */
  set(name: string, value: string): void {
    this.#fields.set(headerName(name), [headerValue(value)]);
  }

  /** Removes a field. */
  delete(name: string): void {
    this.#fields.delete(headerName(name));
  }

  /** Whether a field is there. */
  has(name: string): boolean {
    return this.#fields.has(headerName(name));
  }

  /** A field's values joined with ", ", or null. */
  get(name: string): string | null {
    return this.#fields.get(headerName(name))?.join(", ") ?? null;
  }

  /** The `Set-Cookie` values, one each. */
  getSetCookie(): string[] {
    return [...(this.#fields.get("set-cookie") ?? [])];
  }

  /** Every field in name order (`Set-Cookie` once per value), as `Headers` iterates. */
  *entries(): IterableIterator<[string, string]> {
    for (const key of [...this.#fields.keys()].sort()) {
      const values = this.#fields.get(key) as string[];
      if (key === "set-cookie") { for (const value of values) yield [key, value]; }
      else yield [key, values.join(", ")];
    }
  }

  /** The names, in order. */
  *keys(): IterableIterator<string> {
    for (const [key] of this.entries()) yield key;
  }

  /** The values, in order. */
  *values(): IterableIterator<string> {
    for (const [, value] of this.entries()) yield value;
  }

  /** Calls `callback(value, name)` for every field, in order. */
  forEach(callback: (value: string, key: string, parent: LightHeaders) => void): void {
    for (const [key, value] of this.entries()) callback(value, key, this);
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }
}

/** What a {@link LightRequest} is made from. */
export interface LightRequestInit {
  /** The method. @default "GET" */
  method?: string;
  /** The header fields. */
  headers?: LightHeadersInit;
  /** Aborted when the client goes away. */
  signal?: AbortSignal | null;
  /** A body: refused (the daemon takes none). */
  body?: unknown;
}

const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);

/** A request as the web `Request` holds one: URL, method, headers and signal, no body. */
export class LightRequest {
  /** The absolute URL, serialized. */
  readonly url: string;
  /** The method (the standard ones upper-cased, as `Request` does). */
  readonly method: string;
  /** The header fields. */
  readonly headers: LightHeaders;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /** Always null: no body. */
  readonly body = null;

  constructor(input: string | URL, init: LightRequestInit = {}) {
    if (init.body !== undefined && init.body !== null) {
      throw new TypeError("Cannot make a request with a body: the daemon takes none");
    }
    this.url = new URL(String(input)).href;
    const method = init.method ?? "GET";
    this.method = NORMALIZED_METHODS.has(method.toUpperCase()) ? method.toUpperCase() : method;
    this.headers = new LightHeaders(init.headers);
    this.signal = init.signal ?? new AbortController().signal;
  }
}

/** A body the daemon sends: text, bytes, or none. */
export type LightBody = string | Uint8Array | ArrayBuffer | null;

/** What a {@link LightResponse} is made from (a `ResponseInit`, or another response). */
export interface LightResponseInit {
  /** The status. @default 200 */
  status?: number;
  /** The status text. @default "" */
  statusText?: string;
  /** The header fields. */
  headers?: LightHeadersInit;
}

function bodyBytes(body: LightBody): Uint8Array | null {
  if (body === null) return null;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  return body instanceof Uint8Array ? body : new Uint8Array(body);
}

/** A response as the web `Response` holds one, its body whole (text or bytes). */
export class LightResponse {
  /** The status. */
  readonly status: number;
  /** The status text. */
  readonly statusText: string;
  /** The header fields. */
  readonly headers: LightHeaders;
  readonly #body: LightBody;

  constructor(body: LightBody | undefined = null, init: LightResponseInit = {}) {
    if (
      body !== null && typeof body !== "string" && !(body instanceof Uint8Array) &&
      !(body instanceof ArrayBuffer)
    ) {
      throw new TypeError("Cannot make a response of a stream: the daemon sends whole bodies");
    }
    this.#body = body;
    this.status = init.status ?? 200;
    this.statusText = init.statusText ?? "";
    this.headers = new LightHeaders(init.headers);
    // As `Response` does: a text body without a type is text.
    if (typeof body === "string" && !this.headers.has("content-type")) {
      this.headers.set("content-type", "text/plain;charset=UTF-8");
    }
  }

  /** Whether the status is 2xx. */
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  /** The body as given (another response may be made from it). */
  get body(): LightBody {
    return this.#body;
  }

  /** The body's bytes. */
  arrayBuffer(): Promise<ArrayBuffer> {
    const bytes = bodyBytes(this.#body) ?? new Uint8Array(0);
    return Promise.resolve(
      bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
    );
  }

  /** The body as UTF-8 text. */
  async text(): Promise<string> {
    return new TextDecoder().decode(await this.arrayBuffer());
  }

  /** The body as JSON. */
  async json(): Promise<unknown> {
    return JSON.parse(await this.text());
  }
}

/**
 * Puts {@link LightHeaders}, {@link LightRequest} and {@link LightResponse} in place of the global
 * `Headers`, `Request` and `Response` of this process, before anything has touched Node's own (a
 * global's getter loads them; assigning replaces the getter without loading). Only the daemon's
 * process calls it, and only under Node.
 *
 * @param target the global object @default globalThis
 */
export function useLightWebClasses(
  target: Record<string, unknown> = globalThis as unknown as Record<string, unknown>,
): void {
  target.Headers = LightHeaders;
  target.Request = LightRequest;
  target.Response = LightResponse;
}

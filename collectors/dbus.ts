/**
 * A minimal D-Bus client, just enough to call `org.freedesktop.DBus.Properties.GetAll`
 * on systemd units: unix-socket transport (`node:net`), SASL EXTERNAL authentication,
 * little-endian marshalling of method calls, and an unmarshaller for every D-Bus type
 * (both byte orders). It talks either directly to systemd on `/run/systemd/private`
 * (no `Hello`, no destination) or to the system bus (with `Hello` and destination
 * `org.freedesktop.systemd1`). No `systemctl` or libdbus is needed.
 *
 * @module
 */
import { lstatSync } from "node:fs";
import { createConnection, type Socket } from "node:net";
import process from "node:process";
import { PermissionError, TimeoutError, ToolError, UnavailableError } from "../errors.ts";
import type { DbusValue, SystemdBus } from "./types.ts";

/** systemd's private socket. */
export const SYSTEMD_PRIVATE_SOCKET = "/run/systemd/private";
/** The system bus socket. */
export const SYSTEM_BUS_SOCKET = "/run/dbus/system_bus_socket";
const SYSTEMD_DESTINATION = "org.freedesktop.systemd1";
const MAX_MESSAGE_BYTES = 16 << 20;
const MAX_NESTING = 64;

/** D-Bus message types. */
export const MESSAGE_TYPE = { methodCall: 1, methodReturn: 2, error: 3, signal: 4 } as const;
/** D-Bus header field codes. */
export const HEADER_FIELD = {
  path: 1,
  interface: 2,
  member: 3,
  errorName: 4,
  replySerial: 5,
  destination: 6,
  sender: 7,
  signature: 8,
} as const;

/** A decoded D-Bus message. */
export interface DbusMessage {
  /** One of {@link MESSAGE_TYPE}. */
  type: number;
  /** Flags byte. */
  flags: number;
  /** Serial of this message. */
  serial: number;
  /** Header fields by code (values decoded). */
  fields: Map<number, unknown>;
  /** Body values, one per complete type of the body signature. */
  body: unknown[];
  /** The body signature (`""` when none). */
  signature: string;
}

/** A method call to marshal. */
export interface DbusCall {
  /** Object path. */
  path: string;
  /** Interface. */
  interface: string;
  /** Member (method name). */
  member: string;
  /** Destination bus name (system bus only). */
  destination?: string;
  /** Body signature; only `""` and `"s"` bodies are written. */
  signature?: "" | "s";
  /** Body arguments matching the signature. */
  args?: string[];
}

/**
 * Escapes a unit name for its object path as sd-bus does: every byte that is not an
 * ASCII letter or digit (and a leading digit) becomes `_xx` in lower-case hex.
 *
 * @param name the unit name, e.g. `containerd.service`
 * @returns the path label, e.g. `containerd_2eservice`
 */
export function escapeObjectPathLabel(name: string): string {
  if (name === "") return "_";
  let out = "";
  const bytes = new TextEncoder().encode(name);
  bytes.forEach((byte, index) => {
    const isLetter = (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a);
    const isDigit = byte >= 0x30 && byte <= 0x39;
    if (isLetter || (isDigit && index > 0)) out += String.fromCharCode(byte);
    else out += "_" + byte.toString(16).padStart(2, "0");
  });
  return out;
}

/**
 * The object path of a systemd unit.
 *
 * @param unit the unit name
 * @returns `/org/freedesktop/systemd1/unit/<escaped>`
 */
export function unitObjectPath(unit: string): string {
  return `/org/freedesktop/systemd1/unit/${escapeObjectPathLabel(unit)}`;
}

class Writer {
  #bytes = new Uint8Array(256);
  #view = new DataView(this.#bytes.buffer);
  length = 0;
  #ensure(extra: number): void {
    if (this.length + extra <= this.#bytes.length) return;
    const bigger = new Uint8Array(Math.max(this.#bytes.length * 2, this.length + extra));
    bigger.set(this.#bytes);
    this.#bytes = bigger;
    this.#view = new DataView(bigger.buffer);
  }
  align(n: number): void {
    const pad = (n - (this.length % n)) % n;
    this.#ensure(pad);
    this.#bytes.fill(0, this.length, this.length + pad);
    this.length += pad;
  }
  u8(value: number): void {
    this.#ensure(1);
    this.#bytes[this.length++] = value;
  }
  u32(value: number): void {
    this.align(4);
    this.#ensure(4);
    this.#view.setUint32(this.length, value, true);
    this.length += 4;
  }
  setU32(offset: number, value: number): void {
    this.#view.setUint32(offset, value, true);
  }
  raw(bytes: Uint8Array): void {
    this.#ensure(bytes.length);
    this.#bytes.set(bytes, this.length);
    this.length += bytes.length;
  }
  string(value: string): void {
    const bytes = new TextEncoder().encode(value);
    this.u32(bytes.length);
    this.raw(bytes);
    this.u8(0);
  }
  signature(value: string): void {
    this.u8(value.length);
    this.raw(new TextEncoder().encode(value));
    this.u8(0);
  }
  done(): Uint8Array {
    return this.#bytes.slice(0, this.length);
  }
}

/**
 * Marshals a method call (little endian).
 *
 * @param call the call
 * @param serial the message serial (non-zero)
 * @returns the message bytes
 */
export function encodeMethodCall(call: DbusCall, serial: number): Uint8Array {
  const signature = call.signature ?? "";
  const body = new Writer();
  if (signature === "s") body.string(call.args?.[0] ?? "");
  const w = new Writer();
  w.u8(0x6c); // 'l'
  w.u8(MESSAGE_TYPE.methodCall);
  w.u8(0);
  w.u8(1);
  w.u32(body.length);
  w.u32(serial);
  const arrayLengthAt = w.length;
  w.u32(0);
  w.align(8);
  const fieldsStart = w.length;
  function field(code: number, sig: string, value: string): void {
    w.align(8);
    w.u8(code);
    w.signature(sig);
    if (sig === "g") w.signature(value);
    else w.string(value);
  }
  field(HEADER_FIELD.path, "o", call.path);
  field(HEADER_FIELD.interface, "s", call.interface);
  field(HEADER_FIELD.member, "s", call.member);
  if (call.destination) field(HEADER_FIELD.destination, "s", call.destination);
  if (signature !== "") field(HEADER_FIELD.signature, "g", signature);
  w.setU32(arrayLengthAt, w.length - fieldsStart);
  w.align(8);
  w.raw(body.done());
  return w.done();
}

/** A malformed message. */
export class DbusProtocolError extends ToolError {
  /**
   * Creates the error.
   *
   * @param message what is malformed
   */
  constructor(message: string) {
    super(message, "internal", 502);
    this.name = "DbusProtocolError";
  }
}

class Reader {
  pos: number;
  readonly #view: DataView;
  readonly #little: boolean;
  readonly #bytes: Uint8Array;
  constructor(bytes: Uint8Array, little: boolean, pos = 0) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.#little = little;
    this.pos = pos;
  }
  need(n: number): void {
    if (this.pos + n > this.#bytes.length) {
      throw new DbusProtocolError("Cannot decode D-Bus message: it ends early");
    }
  }
  align(n: number): void {
    this.pos += (n - (this.pos % n)) % n;
  }
  u8(): number {
    this.need(1);
    return this.#bytes[this.pos++] as number;
  }
  u16(): number {
    this.align(2);
    this.need(2);
    const v = this.#view.getUint16(this.pos, this.#little);
    this.pos += 2;
    return v;
  }
  i16(): number {
    this.align(2);
    this.need(2);
    const v = this.#view.getInt16(this.pos, this.#little);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.align(4);
    this.need(4);
    const v = this.#view.getUint32(this.pos, this.#little);
    this.pos += 4;
    return v;
  }
  i32(): number {
    this.align(4);
    this.need(4);
    const v = this.#view.getInt32(this.pos, this.#little);
    this.pos += 4;
    return v;
  }
  u64(): bigint {
    this.align(8);
    this.need(8);
    const v = this.#view.getBigUint64(this.pos, this.#little);
    this.pos += 8;
    return v;
  }
  i64(): bigint {
    this.align(8);
    this.need(8);
    const v = this.#view.getBigInt64(this.pos, this.#little);
    this.pos += 8;
    return v;
  }
  f64(): number {
    this.align(8);
    this.need(8);
    const v = this.#view.getFloat64(this.pos, this.#little);
    this.pos += 8;
    return v;
  }
  text(length: number): string {
    this.need(length + 1);
    const s = new TextDecoder().decode(this.#bytes.subarray(this.pos, this.pos + length));
    this.pos += length + 1; // trailing NUL
    return s;
  }
}

/**
 * Splits a signature into its complete types.
 *
 * @param signature e.g. `sa{sv}(ii)`
 * @returns e.g. `["s", "a{sv}", "(ii)"]`
 * @throws {DbusProtocolError} when the signature is malformed
 */
export function splitSignature(signature: string): string[] {
  const out: string[] = [];
  let pos = 0;
  while (pos < signature.length) {
    const end = completeTypeEnd(signature, pos, 0);
    out.push(signature.slice(pos, end));
    pos = end;
  }
  return out;
}

function completeTypeEnd(sig: string, pos: number, depth: number): number {
  if (depth > MAX_NESTING) {
    throw new DbusProtocolError("Cannot decode D-Bus signature: it nests too deep");
  }
  const ch = sig[pos];
  if (ch === undefined) {
    throw new DbusProtocolError(`Cannot decode D-Bus signature '${sig}': it ends early`);
  }
  if ("ybnqiuxtdsogvh".includes(ch)) return pos + 1;
  if (ch === "a") return completeTypeEnd(sig, pos + 1, depth + 1);
  if (ch === "(" || ch === "{") {
    const close = ch === "(" ? ")" : "}";
    let p = pos + 1;
    while (sig[p] !== close) {
      if (p >= sig.length) {
        throw new DbusProtocolError(`Cannot decode D-Bus signature '${sig}': unclosed '${ch}'`);
      }
      p = completeTypeEnd(sig, p, depth + 1);
    }
    return p + 1;
  }
  throw new DbusProtocolError(`Cannot decode D-Bus signature '${sig}': unknown type code '${ch}'`);
}

function alignmentOf(code: string): number {
  if (code === "(" || code === "{" || code === "x" || code === "t" || code === "d") return 8;
  if (code === "y" || code === "g" || code === "v") return 1;
  if (code === "n" || code === "q") return 2;
  return 4;
}

function toNumberIfSafe(value: bigint): number | bigint {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
    ? Number(value)
    : value;
}

function readValue(r: Reader, sig: string, depth: number): unknown {
  // guard: dbus-depth: a value nesting too deeply is refused
  if (depth > MAX_NESTING) {
    throw new DbusProtocolError("Cannot decode D-Bus value: it nests too deep");
  }
  const code = sig[0];
  switch (code) {
    case "y":
      return r.u8();
    case "b":
      return r.u32() !== 0;
    case "n":
      return r.i16();
    case "q":
      return r.u16();
    case "i":
      return r.i32();
    case "u":
    case "h":
      return r.u32();
    case "x":
      return toNumberIfSafe(r.i64());
    case "t":
      return toNumberIfSafe(r.u64());
    case "d":
      return r.f64();
    case "s":
    case "o":
      return r.text(r.u32());
    case "g":
      return r.text(r.u8());
    case "v": {
      const inner = r.text(r.u8());
      const types = splitSignature(inner);
      if (types.length !== 1) {
        throw new DbusProtocolError(`Cannot decode D-Bus variant '${inner}': it is not one type`);
      }
      return { signature: inner, value: readValue(r, inner, depth + 1) } satisfies DbusValue;
    }
    case "a": {
      const length = r.u32();
      if (length > MAX_MESSAGE_BYTES) {
        throw new DbusProtocolError("Cannot decode D-Bus array: it is too long");
      }
      const element = sig.slice(1);
      r.align(alignmentOf(element[0] as string));
      const end = r.pos + length;
      r.need(length);
      const items: unknown[] = [];
      while (r.pos < end) items.push(readValue(r, element, depth + 1));
      return items;
    }
    case "(":
    case "{": {
      r.align(8);
      const members = splitSignature(sig.slice(1, -1));
      return members.map((member) => readValue(r, member, depth + 1));
    }
    default:
      throw new DbusProtocolError(`Cannot decode D-Bus value: unknown type code '${code}'`);
  }
}

/**
 * Decodes values of a signature from bytes.
 *
 * @param bytes the buffer
 * @param signature the body signature
 * @param options byte order and start offset
 * @returns one value per complete type
 * @throws {DbusProtocolError} when the data is malformed
 */
export function decodeValues(
  bytes: Uint8Array,
  signature: string,
  options: { littleEndian?: boolean; offset?: number } = {},
): unknown[] {
  const r = new Reader(bytes, options.littleEndian ?? true, options.offset ?? 0);
  return splitSignature(signature).map((type) => readValue(r, type, 0));
}

/**
 * The total length of the first message in a buffer, once its fixed header is in.
 *
 * @param bytes received bytes
 * @returns the message length, or undefined when fewer than 16 bytes are buffered
 * @throws {DbusProtocolError} on a bad byte-order mark or an oversized message
 */
export function messageLength(bytes: Uint8Array): number | undefined {
  if (bytes.length < 16) return undefined;
  const little = bytes[0] === 0x6c;
  if (!little && bytes[0] !== 0x42) {
    throw new DbusProtocolError("Cannot decode D-Bus message: bad byte order");
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const bodyLength = view.getUint32(4, little);
  const fieldsLength = view.getUint32(12, little);
  const headerLength = 16 + fieldsLength + ((8 - (fieldsLength % 8)) % 8);
  const total = headerLength + bodyLength;
  if (total > MAX_MESSAGE_BYTES) {
    throw new DbusProtocolError("Cannot decode D-Bus message: it is too large");
  }
  return total;
}

/**
 * Decodes one complete message.
 *
 * @param bytes exactly one message
 * @returns the message
 * @throws {DbusProtocolError} when it is malformed
 */
export function decodeMessage(bytes: Uint8Array): DbusMessage {
  const little = bytes[0] === 0x6c;
  const r = new Reader(bytes, little, 1);
  const type = r.u8();
  const flags = r.u8();
  r.u8(); // protocol version
  const bodyLength = r.u32();
  const serial = r.u32();
  const fields = new Map<number, unknown>();
  const pairs = readValue(r, "a(yv)", 0) as [number, DbusValue][];
  for (const [code, variant] of pairs) fields.set(code, variant.value);
  r.align(8);
  const signature = (fields.get(HEADER_FIELD.signature) as string | undefined) ?? "";
  r.need(bodyLength);
  const body = signature === ""
    ? []
    : decodeValues(bytes.subarray(0, r.pos + bodyLength), signature, {
      littleEndian: little,
      offset: r.pos,
    });
  return { type, flags, serial, fields, body, signature };
}

interface Pending {
  resolve(message: DbusMessage): void;
  reject(error: Error): void;
}

/** An authenticated connection able to make method calls. */
export interface DbusConnection {
  /**
   * Sends a call and waits for its reply.
   *
   * @throws {ToolError} on an error reply (`details` carries the D-Bus error name)
   */
  call(call: DbusCall, signal?: AbortSignal): Promise<DbusMessage>;
  /** Closes the socket. */
  close(): Promise<void>;
}

/**
 * Connects to a Unix socket, bounded by `timeoutMs` and cancelled by the signal.
 *
 * @throws {UnavailableError} when nothing answers in time or the connect fails
 * @throws {TimeoutError} when cancelled
 */
function openSocket(
  socketPath: string,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<Socket> {
  const { timeoutMs, signal } = options;
  // A path that does not exist fails as its connect would (ENOENT), without a socket made for it:
  // a host or pod without systemd's sockets asks twice per collection.
  try {
    lstatSync(socketPath);
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") {
      return Promise.reject(
        new UnavailableError(`Cannot connect to D-Bus at '${socketPath}': ENOENT`, {
          cause: error,
        }),
      );
    }
  }
  return new Promise<Socket>((resolve, reject) => {
    const s = createConnection({ path: socketPath });
    function onAbort(): void {
      clearTimeout(timer);
      s.destroy();
      reject(new TimeoutError(`Cannot connect to D-Bus at '${socketPath}': it was cancelled`));
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      s.destroy();
      reject(
        new UnavailableError(
          `Cannot connect to D-Bus at '${socketPath}': it did not answer within ${timeoutMs} ms`,
        ),
      );
    }, timeoutMs);
    s.once("connect", () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve(s);
    });
    s.once("error", (error: Error & { code?: string }) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      s.destroy();
      reject(
        new UnavailableError(
          `Cannot connect to D-Bus at '${socketPath}': ${error.code ?? error.message}`,
          { cause: error },
        ),
      );
    });
  });
}

/**
 * Connects to a D-Bus socket and authenticates with EXTERNAL.
 *
 * @param socketPath a unix socket path
 * @param options `hello`: send `Hello` first (message buses); `timeoutMs` for connect and auth;
 *   `signal` aborts connecting (and destroys the socket)
 * @returns the connection
 * @throws {UnavailableError} when the socket is missing, refuses, or rejects authentication
 */
export async function connectDbus(
  socketPath: string,
  options: { hello?: boolean; timeoutMs?: number; uid?: number; signal?: AbortSignal } = {},
): Promise<DbusConnection> {
  const { hello = false, timeoutMs = 5000, signal } = options;
  if (signal?.aborted) {
    throw new TimeoutError(`Cannot connect to D-Bus at '${socketPath}': it was cancelled`);
  }
  const uid = options.uid ?? process.getuid?.() ?? 0;
  const socket = await openSocket(socketPath, { timeoutMs, ...(signal ? { signal } : {}) });
  const connection = new SocketConnection(socket, socketPath, timeoutMs);
  function onAbortDuringSetup(): void {
    connection.abort(
      new TimeoutError(`Cannot connect to D-Bus at '${socketPath}': it was cancelled`),
    );
  }
  signal?.addEventListener("abort", onAbortDuringSetup, { once: true });
  try {
    await connection.authenticate(uid);
    if (hello) {
      await connection.call({
        path: "/org/freedesktop/DBus",
        interface: "org.freedesktop.DBus",
        member: "Hello",
        destination: "org.freedesktop.DBus",
      });
    }
    return connection;
  } catch (error) {
    await connection.close();
    throw error;
  } finally {
    signal?.removeEventListener("abort", onAbortDuringSetup);
  }
}

/**
 * One D-Bus connection over a socket: the EXTERNAL handshake's line, then messages matched to
 * their calls by serial. Every waiter fails with the first error the socket meets.
 */
class SocketConnection implements DbusConnection {
  readonly #socket: Socket;
  readonly #path: string;
  readonly #timeoutMs: number;
  #buffer = new Uint8Array(0);
  #authenticated = false;
  #authWaiter: { resolve(line: string): void; reject(error: Error): void } | undefined;
  readonly #pending = new Map<number, Pending>();
  #closedError: Error | undefined;
  #serial = 0;

  constructor(socket: Socket, path: string, timeoutMs: number) {
    this.#socket = socket;
    this.#path = path;
    this.#timeoutMs = timeoutMs;
    socket.on("data", (chunk: Uint8Array) => this.#onData(chunk));
    socket.on("error", (error) =>
      this.#failAll(
        new UnavailableError(`Cannot talk to D-Bus at '${path}': ${error.message}`, {
          cause: error,
        }),
      ));
    socket.on("close", () =>
      this.#failAll(
        new UnavailableError(`Cannot talk to D-Bus at '${path}': the connection closed`),
      ));
  }

  /** Authenticates as `uid` with EXTERNAL and begins the message stream. */
  async authenticate(uid: number): Promise<void> {
    const hexUid = Array.from(
      new TextEncoder().encode(String(uid)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    this.#socket.write(`\0AUTH EXTERNAL ${hexUid}\r\n`);
    const answer = await this.#readLine();
    if (!answer.startsWith("OK")) {
      throw new UnavailableError(
        `Cannot authenticate to D-Bus at '${this.#path}': the server answered '${answer}'`,
      );
    }
    this.#socket.write("BEGIN\r\n");
    this.#authenticated = true;
    if (this.#buffer.length > 0) this.#onData(new Uint8Array(0));
  }

  /** Destroys the socket and fails every waiter with `error`. */
  abort(error: Error): void {
    this.#socket.destroy();
    this.#failAll(error);
  }

  call(call: DbusCall, signal?: AbortSignal): Promise<DbusMessage> {
    return new Promise((resolve, reject) => {
      if (this.#closedError) return reject(this.#closedError);
      const deadline = () =>
        new TimeoutError(`Cannot call ${call.member} on '${call.path}': the deadline passed`);
      if (signal?.aborted) return reject(deadline());
      const id = ++this.#serial;
      const onAbort = (): void => {
        this.#pending.delete(id);
        reject(deadline());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#pending.set(id, {
        resolve(message) {
          signal?.removeEventListener("abort", onAbort);
          if (message.type === MESSAGE_TYPE.error) reject(replyError(call, message));
          else resolve(message);
        },
        reject(error) {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      });
      this.#socket.write(encodeMethodCall(call, id));
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#socket.destroyed) return resolve();
      this.#socket.once("close", () => resolve());
      this.#socket.end();
      this.#socket.destroy();
    });
  }

  #failAll(error: Error): void {
    this.#closedError ??= error;
    this.#authWaiter?.reject(error);
    this.#authWaiter = undefined;
    for (const p of this.#pending.values()) p.reject(error);
    this.#pending.clear();
  }

  #onData(chunk: Uint8Array): void {
    const merged = new Uint8Array(this.#buffer.length + chunk.length);
    merged.set(this.#buffer);
    merged.set(chunk, this.#buffer.length);
    this.#buffer = merged;
    try {
      if (!this.#authenticated) {
        const newline = this.#buffer.indexOf(0x0a);
        if (newline < 0) return;
        const line = new TextDecoder().decode(this.#buffer.subarray(0, newline)).replace(/\r$/, "");
        this.#buffer = this.#buffer.slice(newline + 1);
        this.#authWaiter?.resolve(line);
        this.#authWaiter = undefined;
        return;
      }
      for (;;) {
        const length = messageLength(this.#buffer);
        if (length === undefined || this.#buffer.length < length) return;
        const message = decodeMessage(this.#buffer.subarray(0, length));
        this.#buffer = this.#buffer.slice(length);
        const replyTo = message.fields.get(HEADER_FIELD.replySerial);
        if (typeof replyTo !== "number") continue; // signals such as NameAcquired
        const waiter = this.#pending.get(replyTo);
        if (!waiter) continue;
        this.#pending.delete(replyTo);
        waiter.resolve(message);
      }
    } catch (error) {
      this.abort(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #readLine(): Promise<string> {
    return new Promise((resolve, reject) => {
      if (this.#closedError) return reject(this.#closedError);
      const timer = setTimeout(() => {
        this.#authWaiter = undefined;
        reject(
          new UnavailableError(
            `Cannot authenticate to D-Bus at '${this.#path}': no answer within ${this.#timeoutMs} ms`,
          ),
        );
      }, this.#timeoutMs);
      this.#authWaiter = {
        resolve: (line) => (clearTimeout(timer), resolve(line)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      };
    });
  }
}

/** An error reply as the error a caller catches: unavailable, denied, or another failure. */
function replyError(call: DbusCall, message: DbusMessage): ToolError {
  const name = String(message.fields.get(HEADER_FIELD.errorName) ?? "unknown");
  const text = typeof message.body[0] === "string" ? `: ${message.body[0]}` : "";
  const reason = `Cannot call ${call.member} on '${call.path}': ${name}${text}`;
  if (name.endsWith(".ServiceUnknown") || name.endsWith(".NameHasNoOwner")) {
    return new UnavailableError(reason, { details: [name] });
  }
  if (name.endsWith(".AccessDenied")) return new PermissionError(reason, { details: [name] });
  return new ToolError(reason, "internal", 502, { details: [name] });
}

/** A connection to systemd: its private socket, or the system bus (then with a destination). */
interface SystemdConnection {
  connection: DbusConnection;
  destination?: string;
  source: string;
}

/**
 * Connects to systemd's private socket, else to the system bus.
 *
 * @throws {UnavailableError} when neither answers, with both reasons
 */
async function connectSystemd(
  sockets: { privateSocket: string; systemSocket: string; timeoutMs: number },
  signal: AbortSignal,
): Promise<SystemdConnection> {
  const { privateSocket, systemSocket, timeoutMs } = sockets;
  const reasons: string[] = [];
  try {
    const connection = await connectDbus(privateSocket, { timeoutMs, signal });
    return { connection, source: privateSocket };
  } catch (error) {
    reasons.push(error instanceof Error ? error.message : String(error));
  }
  try {
    const connection = await connectDbus(systemSocket, { hello: true, timeoutMs, signal });
    return { connection, destination: SYSTEMD_DESTINATION, source: systemSocket };
  } catch (error) {
    reasons.push(error instanceof Error ? error.message : String(error));
  }
  throw new UnavailableError(
    `Cannot reach systemd: neither '${privateSocket}' nor '${systemSocket}' answered`,
    { details: reasons },
  );
}

/** `org.freedesktop.DBus.Properties.GetAll` on a unit's object. */
async function getAllProperties(
  connected: SystemdConnection,
  unit: string,
  signal: AbortSignal | undefined,
): Promise<Record<string, DbusValue>> {
  const { connection, destination } = connected;
  const call: DbusCall = {
    path: unitObjectPath(unit),
    interface: "org.freedesktop.DBus.Properties",
    member: "GetAll",
    signature: "s",
    args: [""],
  };
  if (destination) call.destination = destination;
  const reply = await connection.call(call, signal);
  if (reply.signature !== "a{sv}") {
    throw new DbusProtocolError(
      `Cannot read properties of '${unit}': the reply signature is '${reply.signature}'`,
    );
  }
  const out: Record<string, DbusValue> = {};
  for (const [name, variant] of reply.body[0] as [string, DbusValue][]) out[name] = variant;
  return out;
}

/**
 * Creates a {@link SystemdBus} that connects lazily on first use: first to systemd's
 * private socket, then to the system bus.
 *
 * @param options socket paths (defaults: {@link SYSTEMD_PRIVATE_SOCKET}, {@link SYSTEM_BUS_SOCKET})
 * @returns the bus
 */
export function createSystemdBus(
  options: { privateSocket?: string; systemSocket?: string; timeoutMs?: number } = {},
): SystemdBus {
  const {
    privateSocket = SYSTEMD_PRIVATE_SOCKET,
    systemSocket = SYSTEM_BUS_SOCKET,
    timeoutMs = 5000,
  } = options;
  let connecting: Promise<SystemdConnection> | undefined;
  // Aborted by close(), so a close during a slow connect does not wait for its timeout.
  let lifetime = new AbortController();
  const connect = () => connectSystemd({ privateSocket, systemSocket, timeoutMs }, lifetime.signal);
  return {
    async getUnitProperties(
      unit: string,
      signal?: AbortSignal,
    ): Promise<Record<string, DbusValue>> {
      connecting ??= connect();
      // A caller's deadline also stops a connect in progress.
      const stopConnect = () => lifetime.abort();
      signal?.addEventListener("abort", stopConnect, { once: true });
      let connected;
      try {
        connected = await connecting;
      } finally {
        signal?.removeEventListener("abort", stopConnect);
      }
      return await getAllProperties(connected, unit, signal);
    },
    async close(): Promise<void> {
      if (!connecting) return;
      const current = connecting;
      connecting = undefined;
      lifetime.abort();
      lifetime = new AbortController();
      try {
        await (await current).connection.close();
      } catch {
        // never connected
      }
    },
  };
}

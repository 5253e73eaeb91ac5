import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { NOOP_LOGGER } from "../log.ts";
import { collectMeasurements } from "./collect.ts";
import { createCommandRunner, createHostReader } from "./host.ts";
import {
  connectDbus,
  createSystemdBus,
  decodeMessage,
  escapeObjectPathLabel,
  messageLength,
  unitObjectPath,
} from "./dbus.ts";
import { collectSystemd, goFloat, goFormat, toReading, unitReadings } from "./systemd.ts";
import type { DbusValue } from "./types.ts";

// ---------- an independent D-Bus marshaller for the fake server's replies ----------

type Value = unknown;
class Out {
  bytes: number[] = [];
  constructor(readonly little: boolean) {}
  align(n: number): void {
    while (this.bytes.length % n !== 0) this.bytes.push(0);
  }
  int(size: number, value: bigint | number, signed = false): void {
    this.align(size);
    let v = BigInt(value);
    if (signed && v < 0n) v += 1n << BigInt(size * 8);
    const le: number[] = [];
    for (let i = 0; i < size; i++) le.push(Number((v >> BigInt(8 * i)) & 0xffn));
    this.bytes.push(...(this.little ? le : le.reverse()));
  }
  str(value: string, lengthSize: 1 | 4): void {
    const b = [...new TextEncoder().encode(value)];
    if (lengthSize === 1) this.bytes.push(b.length);
    else this.int(4, b.length);
    this.bytes.push(...b, 0);
  }
}
function oneType(sig: string): [string, string] {
  let depth = 0;
  for (let i = 0; i < sig.length; i++) {
    const c = sig[i] as string;
    if (c === "(" || c === "{") depth++;
    else if (c === ")" || c === "}") depth--;
    if (depth === 0 && c !== "a") return [sig.slice(0, i + 1), sig.slice(i + 1)];
  }
  throw new Error(`bad signature ${sig}`);
}
function types(sig: string): string[] {
  const out: string[] = [];
  while (sig !== "") {
    const [t, rest] = oneType(sig);
    out.push(t);
    sig = rest;
  }
  return out;
}
function put(o: Out, sig: string, value: Value): void {
  const c = sig[0];
  if (c === "y") o.bytes.push(value as number);
  else if (c === "b") o.int(4, value ? 1 : 0);
  else if (c === "n") o.int(2, value as number, true);
  else if (c === "q") o.int(2, value as number);
  else if (c === "i") o.int(4, value as number, true);
  else if (c === "u" || c === "h") o.int(4, value as number);
  else if (c === "x") o.int(8, value as bigint, true);
  else if (c === "t") o.int(8, value as bigint);
  else if (c === "d") {
    o.align(8);
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, value as number, o.little);
    o.bytes.push(...b);
  } else if (c === "s" || c === "o") o.str(value as string, 4);
  else if (c === "g") o.str(value as string, 1);
  else if (c === "v") {
    const v = value as DbusValue;
    o.str(v.signature, 1);
    put(o, v.signature, v.value);
  } else if (c === "a") {
    const element = sig.slice(1);
    o.align(4);
    const lengthAt = o.bytes.length;
    o.int(4, 0);
    o.align(
      element[0] === "(" || element[0] === "{" || "xtd".includes(element[0] as string)
        ? 8
        : element[0] === "n" || element[0] === "q"
        ? 2
        : element[0] === "y" || element[0] === "g" || element[0] === "v"
        ? 1
        : 4,
    );
    const start = o.bytes.length;
    for (const item of value as Value[]) put(o, element, item);
    const length = o.bytes.length - start;
    const patch = new Out(o.little);
    patch.int(4, length);
    o.bytes.splice(lengthAt, 4, ...patch.bytes);
  } else if (c === "(" || c === "{") {
    o.align(8);
    types(sig.slice(1, -1)).forEach((t, i) => put(o, t, (value as Value[])[i]));
  } else throw new Error(`unsupported ${sig}`);
}
function message(
  little: boolean,
  type: number,
  serial: number,
  fields: [number, string, Value][],
  signature: string,
  body: Value[],
): Uint8Array {
  const bodyOut = new Out(little);
  types(signature).forEach((t, i) => put(bodyOut, t, body[i]));
  const h = new Out(little);
  h.bytes.push(little ? 0x6c : 0x42, type, 0, 1);
  h.int(4, bodyOut.bytes.length);
  h.int(4, serial);
  const all: [number, string, Value][] = signature === ""
    ? fields
    : [...fields, [8, "g", signature]];
  put(h, "a(yv)", all.map(([code, sig, v]) => [code, { signature: sig, value: v }]));
  h.align(8);
  return new Uint8Array([...h.bytes, ...bodyOut.bytes]);
}

// ---------- the fake server ----------

interface FakeUnit {
  reply?: [string, DbusValue][];
  error?: string;
  bigEndian?: boolean;
}
interface Received {
  path: unknown;
  member: unknown;
  interface: unknown;
  destination: unknown;
  body: unknown[];
}

async function startFakeDbus(
  socketPath: string,
  units: Record<string, FakeUnit>,
  options: { bus?: boolean; reject?: boolean } = {},
): Promise<{ server: Server; received: Received[]; authLines: string[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const authLines: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    let buffer = new Uint8Array(0);
    let authed = false;
    let serial = 1000;
    socket.on("data", (chunk: Uint8Array) => {
      const merged = new Uint8Array(buffer.length + chunk.length);
      merged.set(buffer);
      merged.set(chunk, buffer.length);
      buffer = merged;
      while (!authed) {
        const nl = buffer.indexOf(0x0a);
        if (nl < 0) return;
        const line = new TextDecoder().decode(buffer.subarray(0, nl));
        buffer = buffer.slice(nl + 1);
        authLines.push(line);
        if (line.includes("AUTH EXTERNAL")) {
          socket.write(
            options.reject ? "REJECTED EXTERNAL\r\n" : "OK 0123456789abcdef0123456789abcdef\r\n",
          );
        }
        if (line.startsWith("BEGIN")) authed = true;
      }
      for (;;) {
        const length = messageLength(buffer);
        if (length === undefined || buffer.length < length) return;
        const call = decodeMessage(buffer.subarray(0, length));
        buffer = buffer.slice(length);
        const f = call.fields;
        received.push({
          path: f.get(1),
          interface: f.get(2),
          member: f.get(3),
          destination: f.get(6),
          body: call.body,
        });
        if (f.get(3) === "Hello") {
          socket.write(
            message(true, 2, serial++, [[5, "u", call.serial], [6, "s", ":1.42"]], "s", [":1.42"]),
          );
          // A signal before the next reply, which the client must skip.
          socket.write(
            message(
              true,
              4,
              serial++,
              [[1, "o", "/org/freedesktop/DBus"], [2, "s", "org.freedesktop.DBus"], [
                3,
                "s",
                "NameAcquired",
              ]],
              "s",
              [":1.42"],
            ),
          );
          continue;
        }
        const unit = Object.entries(units).find(([name]) => unitObjectPath(name) === f.get(1))?.[1];
        if (!unit || unit.error) {
          const name = unit?.error ?? "org.freedesktop.DBus.Error.UnknownObject";
          socket.write(
            message(true, 3, serial++, [[4, "s", name], [5, "u", call.serial]], "s", [
              `no ${String(f.get(1))}`,
            ]),
          );
          continue;
        }
        socket.write(
          message(!unit.bigEndian, 2, serial++, [[5, "u", call.serial]], "a{sv}", [
            unit.reply ?? [],
          ]),
        );
      }
    });
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    server,
    received,
    authLines,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const CONTAINERD: [string, DbusValue][] = [
  ["Id", { signature: "s", value: "containerd.service" }],
  ["BusName", { signature: "s", value: "" }],
  ["LoadCredential", { signature: "a(ss)", value: [] }],
  ["SetCredentialEncrypted", { signature: "a(say)", value: [] }],
  ["AllowedCPUs", { signature: "ay", value: [] }],
  ["ActiveState", { signature: "s", value: "active" }],
  ["LoadState", { signature: "s", value: "loaded" }],
  ["SubState", { signature: "s", value: "running" }],
  ["UnitFileState", { signature: "s", value: "enabled" }],
  ["CPUAccounting", { signature: "b", value: true }],
  ["NRestarts", { signature: "u", value: 0 }],
  ["Nice", { signature: "i", value: -5 }],
  ["UMask", { signature: "u", value: 18 }],
  ["IOSchedulingClass", { signature: "y", value: 2 }],
  ["MemoryMax", { signature: "t", value: 18446744073709551615n }],
  ["TimeoutStopUSec", { signature: "t", value: 90000000n }],
  ["ExecMainStartTimestamp", { signature: "x", value: -1n }],
  ["CPUQuotaRatio", { signature: "d", value: 0.5 }],
  ["Wants", { signature: "as", value: ["network-online.target", "local-fs.target"] }],
  ["Slice", { signature: "o", value: "/org/freedesktop/systemd1/unit/system_2eslice" }],
  ["ExecStart", {
    signature: "a(sasbttttuii)",
    value: [["/usr/bin/containerd", ["/usr/bin/containerd"], false, 0n, 0n, 0n, 0n, 1234, 0, 0]],
  }],
  ["Extra", {
    signature: "a{sv}",
    value: [["b", { signature: "u", value: 2 }], ["a", { signature: "s", value: "x" }]],
  }],
];

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "aicr-dbus-"));
  try {
    await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

Deno.test("escapeObjectPathLabel() escapes like sd-bus", () => {
  assert.equal(escapeObjectPathLabel("containerd.service"), "containerd_2eservice");
  assert.equal(escapeObjectPathLabel("systemd-journald.service"), "systemd_2djournald_2eservice");
  assert.equal(escapeObjectPathLabel("2fa@x.service"), "_32fa_40x_2eservice");
  assert.equal(escapeObjectPathLabel(""), "_");
});

Deno.test("goFormat() renders non-native D-Bus values as Go's %v does", () => {
  assert.equal(goFormat("u", 0), "0");
  assert.equal(goFormat("as", ["a", "b"]), "[a b]");
  assert.equal(goFormat("as", []), "[]");
  assert.equal(goFormat("ay", [1, 2]), "[1 2]");
  assert.equal(goFormat("a(ss)", [["a", "b"], ["c", "d"]]), "[{a b} {c d}]");
  assert.equal(
    goFormat("a{sv}", [["z", { signature: "b", value: true }], ["a", {
      signature: "as",
      value: ["x"],
    }]]),
    "map[a:[x] z:true]",
  );
  assert.equal(goFormat("a{us}", [[10, "x"], [9, "y"]]), "map[9:y 10:x]");
  assert.equal(goFormat("v", { signature: "t", value: 5 }), "5");
  assert.equal(goFormat("ad", [0.5, 1e21, 1e-7]), "[0.5 1e+21 1e-07]");
  assert.equal(goFloat(100), "100");
  assert.equal(goFloat(Infinity), "+Inf");
});

Deno.test("toReading() keeps s, b, x, t and d native and stringifies the rest", () => {
  assert.equal(toReading({ signature: "s", value: "active" }), "active");
  assert.equal(toReading({ signature: "b", value: false }), false);
  assert.equal(toReading({ signature: "t", value: 18446744073709551615n }), 18446744073709551615n);
  assert.equal(toReading({ signature: "x", value: -1 }), -1);
  assert.equal(toReading({ signature: "d", value: 0.25 }), 0.25);
  assert.equal(toReading({ signature: "u", value: 7 }), "7");
  assert.equal(toReading({ signature: "o", value: "/a/b" }), "/a/b");
});

Deno.test("unitReadings() drops Id, BusName, AllowedCPUs and any *Credential* key", () => {
  const data = unitReadings(Object.fromEntries(CONTAINERD));
  for (const key of ["Id", "BusName", "LoadCredential", "SetCredentialEncrypted", "AllowedCPUs"]) {
    assert.equal(key in data, false, key);
  }
  assert.equal(data.ActiveState, "active");
});

Deno.test("createSystemdBus() speaks D-Bus to systemd's private socket: EXTERNAL auth, GetAll with an empty interface", async () => {
  await withTempDir(async (dir) => {
    const socketPath = path.join(dir, "private");
    const fake = await startFakeDbus(socketPath, {
      "containerd.service": { reply: CONTAINERD },
      "docker.service": {
        reply: [["LoadState", { signature: "s", value: "not-found" }], ["ActiveState", {
          signature: "s",
          value: "inactive",
        }]],
        bigEndian: true,
      },
      "kubelet.service": { error: "org.freedesktop.DBus.Error.AccessDenied" },
    });
    try {
      const bus = createSystemdBus({
        privateSocket: socketPath,
        systemSocket: path.join(dir, "none"),
      });
      const m = await collectSystemd({ systemd: bus, log: NOOP_LOGGER });
      assert.deepEqual(m.subtypes.map((s) => s.subtype), [
        "containerd.service",
        "docker.service",
        "kubelet.service",
      ]);
      assert.deepEqual(m.subtypes[0]?.data, {
        ActiveState: "active",
        LoadState: "loaded",
        SubState: "running",
        UnitFileState: "enabled",
        CPUAccounting: true,
        NRestarts: "0",
        Nice: "-5",
        UMask: "18",
        IOSchedulingClass: "2",
        MemoryMax: 18446744073709551615n,
        TimeoutStopUSec: 90000000,
        ExecMainStartTimestamp: -1,
        CPUQuotaRatio: 0.5,
        Wants: "[network-online.target local-fs.target]",
        Slice: "/org/freedesktop/systemd1/unit/system_2eslice",
        ExecStart: "[{/usr/bin/containerd [/usr/bin/containerd] false 0 0 0 0 1234 0 0}]",
        Extra: "map[a:x b:2]",
      });
      assert.deepEqual(m.subtypes[0]?.context, {
        status: "ok",
        source: "dbus:org.freedesktop.systemd1 /org/freedesktop/systemd1/unit/containerd_2eservice",
      });
      assert.deepEqual(m.subtypes[1]?.data, { LoadState: "not-found", ActiveState: "inactive" });
      assert.equal(m.subtypes[2]?.context?.status, "denied");
      assert.deepEqual(m.subtypes[2]?.data, {});
      // The wire: auth line with the hex uid, then three GetAll calls with no Hello and no destination.
      const uid = String(process.getuid?.() ?? 0);
      const hex = [...new TextEncoder().encode(uid)].map((b) => b.toString(16).padStart(2, "0"))
        .join("");
      assert.equal(fake.authLines[0], `\0AUTH EXTERNAL ${hex}\r`);
      assert.equal(fake.authLines[1], "BEGIN\r");
      assert.deepEqual(fake.received.map((r) => [r.member, r.interface, r.destination, r.body]), [
        ["GetAll", "org.freedesktop.DBus.Properties", undefined, [""]],
        ["GetAll", "org.freedesktop.DBus.Properties", undefined, [""]],
        ["GetAll", "org.freedesktop.DBus.Properties", undefined, [""]],
      ]);
      assert.equal(fake.received[1]?.path, "/org/freedesktop/systemd1/unit/docker_2eservice");
    } finally {
      await fake.close();
    }
  });
});

Deno.test("createSystemdBus() falls back to the system bus: Hello first, then GetAll to org.freedesktop.systemd1", async () => {
  await withTempDir(async (dir) => {
    const socketPath = path.join(dir, "system_bus_socket");
    const fake = await startFakeDbus(socketPath, { "containerd.service": { reply: CONTAINERD } }, {
      bus: true,
    });
    try {
      const bus = createSystemdBus({
        privateSocket: path.join(dir, "missing"),
        systemSocket: socketPath,
      });
      const m = await collectSystemd({ systemd: bus, log: NOOP_LOGGER }, { units: [] });
      assert.deepEqual(m.subtypes.map((s) => s.subtype), ["containerd.service"]);
      assert.equal(m.subtypes[0]?.data.SubState, "running");
      assert.deepEqual(fake.received.map((r) => [r.member, r.destination]), [
        ["Hello", "org.freedesktop.DBus"],
        ["GetAll", "org.freedesktop.systemd1"],
      ]);
    } finally {
      await fake.close();
    }
  });
});

Deno.test("collectSystemd() gives only a status subtype when no socket answers or auth is rejected", async () => {
  await withTempDir(async (dir) => {
    const none = await collectSystemd({
      systemd: createSystemdBus({
        privateSocket: path.join(dir, "a"),
        systemSocket: path.join(dir, "b"),
      }),
      log: NOOP_LOGGER,
    });
    assert.equal(none.subtypes.length, 1);
    assert.equal(none.subtypes[0]?.subtype, "status");
    assert.deepEqual(none.subtypes[0]?.data, {});
    assert.equal(none.subtypes[0]?.context?.status, "absent");
    assert.match(none.subtypes[0]?.context?.message ?? "", /Cannot reach systemd/);

    const socketPath = path.join(dir, "private");
    const fake = await startFakeDbus(socketPath, {}, { reject: true });
    try {
      const rejected = await collectSystemd({
        systemd: createSystemdBus({ privateSocket: socketPath, systemSocket: path.join(dir, "b") }),
        log: NOOP_LOGGER,
      });
      assert.equal(rejected.subtypes[0]?.subtype, "status");
      assert.equal(rejected.subtypes[0]?.context?.status, "absent");
    } finally {
      await fake.close();
    }
    const unconfigured = await collectSystemd({ log: NOOP_LOGGER });
    assert.equal(unconfigured.subtypes[0]?.context?.status, "absent");
  });
});

Deno.test("collectMeasurements() stops a systemd connect that never authenticates at its deadline", async () => {
  await withTempDir(async (dir) => {
    const socketPath = path.join(dir, "private");
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket); // accepts, then never answers AUTH
    });
    await new Promise<void>((resolve) => server.listen(socketPath, resolve));
    try {
      const { measurements, reports } = await collectMeasurements({
        host: createHostReader({ root: dir }),
        exec: createCommandRunner({ path: dir }),
        systemd: () =>
          createSystemdBus({ privateSocket: socketPath, systemSocket: path.join(dir, "none") }),
        env: () => undefined,
        log: NOOP_LOGGER,
      }, { only: ["systemd"], timeoutsMs: { systemd: 100 } });
      assert.equal(reports[0]?.status, "timeout");
      assert.deepEqual(measurements[0]?.subtypes.map((s) => [s.subtype, s.context?.status]), [[
        "status",
        "timeout",
      ]]);
      // Let the collector's own unwinding (socket destroy) finish before the sanitizers look.
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

Deno.test("connectDbus() names why a socket path is refused: a missing one as its connect would (ENOENT)", async () => {
  await withTempDir(async (dir) => {
    const missing = path.join(dir, "missing");
    await assert.rejects(
      connectDbus(missing),
      (e) =>
        e instanceof Error && e.name === "UnavailableError" &&
        e.message === `Cannot connect to D-Bus at '${missing}': ENOENT`,
    );
    // Not a socket: the connect itself is refused.
    await assert.rejects(
      connectDbus(dir),
      (e) =>
        e instanceof Error && e.name === "UnavailableError" &&
        e.message.startsWith(`Cannot connect to D-Bus at '${dir}': `) &&
        !e.message.endsWith("ENOENT"),
    );
  });
});

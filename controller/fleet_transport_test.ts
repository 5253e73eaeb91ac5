import assert from "node:assert/strict";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { generateDaemonTls } from "../x509.ts";
import { AnswerTooLargeError, nodeDirectGet } from "./fleet_transport.ts";

/**
 * An HTTPS server answering `body` in 64 KiB writes, declaring `declare` bytes if given; with
 * `stall`, it never ends the answer. Closed after use.
 */
async function answeringServer(
  body: Uint8Array,
  options: { declare?: number; stall?: boolean },
) {
  const tls = generateDaemonTls({ dnsNames: ["aicr-daemon.ns.svc"], now: new Date() });
  const sent = { bytes: 0 };
  const server = createHttpsServer({ cert: tls.cert, key: tls.key }, (_req, res) => {
    const declared = options.declare === undefined ? {} : { "content-length": options.declare };
    res.writeHead(200, declared);
    const write = (from: number): void => {
      if (res.destroyed) return;
      if (from >= body.length) return void (options.stall ? undefined : res.end());
      const piece = body.subarray(from, from + 64 * 1024);
      sent.bytes += piece.length;
      if (res.write(piece)) write(from + piece.length);
      else res.once("drain", () => write(from + piece.length));
    };
    write(0);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    sent,
    request: {
      url: `https://127.0.0.1:${port}/v1/snapshot`,
      token: "t",
      connectTimeoutMs: 30_000,
      ca: tls.caCert,
      servername: "aicr-daemon.ns.svc",
      maxBytes: 1 << 20,
      // Guards against a hang only: every answer below comes (or is refused) at once.
      signal: AbortSignal.timeout(30_000),
    },
    [Symbol.asyncDispose]: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const TOO_LARGE = (e: unknown) =>
  e instanceof AnswerTooLargeError && /1048576-byte bound/.test(e.message);

Deno.test("nodeDirectGet() refuses an answer declaring more than the bound without waiting for its body", async () => {
  // 8 MiB declared, 10 bytes sent, the rest never: only the declaration can refuse it.
  await using server = await answeringServer(new Uint8Array(10), {
    declare: 8 << 20,
    stall: true,
  });
  await assert.rejects(nodeDirectGet(server.request), TOO_LARGE);
});

Deno.test("nodeDirectGet() cuts an answer that declares no length at the bound", async () => {
  const huge = new Uint8Array(8 << 20).fill(0x61);
  await using server = await answeringServer(huge, {});
  await assert.rejects(nodeDirectGet(server.request), TOO_LARGE);
  assert.ok(server.sent.bytes < huge.length, `cut: ${server.sent.bytes} bytes sent`);
  await using small = await answeringServer(new TextEncoder().encode("ok"), {});
  const answer = await nodeDirectGet(small.request);
  assert.deepEqual([answer.status, answer.body], [200, "ok"]);
});

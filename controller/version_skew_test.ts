import assert from "node:assert/strict";
import { imageVersion, warnVersionSkew } from "./version_skew.ts";
import type { Logger } from "../log.ts";

Deno.test("imageVersion() reads the version a tag says, with or without v, and nothing from latest or a digest", () => {
  assert.equal(imageVersion("ghcr.io/aicr-run/aicr:0.2.0"), "0.2.0");
  assert.equal(imageVersion("registry.local:5000/mirror/aicr:v0.3.1-rc.1"), "0.3.1-rc.1");
  assert.equal(imageVersion("registry.local:5000/aicr"), undefined);
  assert.equal(imageVersion("aicr:latest"), undefined);
  assert.equal(imageVersion("aicr@sha256:0123"), undefined);
});

Deno.test("warnVersionSkew() says nothing without skew, and names both versions and the remedy with it", () => {
  const warned: { message: string; fields: Record<string, unknown> }[] = [];
  const log = {
    warn: (message: string, fields: Record<string, unknown>) => warned.push({ message, fields }),
  } as unknown as Logger;
  warnVersionSkew(log, [], "0.2.0", "aicr-system");
  assert.equal(warned.length, 0);
  warnVersionSkew(log, ["0.1.0"], "0.2.0", "aicr-system");
  assert.equal(warned.length, 1);
  assert.deepEqual(warned[0]?.fields, {
    daemons: "0.1.0",
    cli: "0.2.0",
    remedy: "aicr daemonset upgrade -n aicr-system",
  });
});

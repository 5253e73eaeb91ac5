/**
 * The transport's PING, cut-answer and HTTP/1.1 keepalive scenarios under Node 24, bundled by `h2_test.ts`: prints
 * their reports as one JSON line.
 *
 * @module
 */
import process from "node:process";
import { cutScenarios, http1WatchKeepalive, pingScenarios } from "./h2_server.ts";

if (import.meta.main) {
  const report = {
    ping: await pingScenarios(),
    cut: await cutScenarios(),
    keepalive: await http1WatchKeepalive(),
  };
  process.stdout.write(JSON.stringify(report) + "\n");
}

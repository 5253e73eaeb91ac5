/**
 * The transport's PING and cut-answer scenarios under Node 24, bundled by `h2_test.ts`: prints
 * their reports as one JSON line.
 *
 * @module
 */
import process from "node:process";
import { cutScenarios, pingScenarios } from "./h2_server.ts";

if (import.meta.main) {
  const report = { ping: await pingScenarios(), cut: await cutScenarios() };
  process.stdout.write(JSON.stringify(report) + "\n");
}

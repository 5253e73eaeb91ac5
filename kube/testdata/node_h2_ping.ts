/**
 * The transport's PING scenarios under Node 24, bundled by `h2_test.ts`: prints their report as
 * one JSON line.
 *
 * @module
 */
import process from "node:process";
import { pingScenarios } from "./h2_server.ts";

if (import.meta.main) {
  process.stdout.write(JSON.stringify(await pingScenarios()) + "\n");
}

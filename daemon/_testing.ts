/**
 * Test and bench helpers of the daemon: a sample snapshot, fake authenticator and
 * authorizer, a counting collector, and TLS material generated with the `openssl` CLI.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sampleSnapshot } from "../tests/fakes/snapshot.ts";
import type { AccessAttributes, AccessAuthorizer, TokenAuthenticator, UserInfo } from "./auth.ts";
import type { CollectFunction, CollectResult } from "./cache.ts";
import type { CollectorReport } from "./metrics.ts";

export { sampleSnapshot };

/** Reports of a collection where every collector succeeded. */
export const OK_REPORTS: CollectorReport[] = [
  { collector: "gpu", type: "GPU", status: "ok", durationMs: 120 },
  { collector: "os", type: "OS", status: "ok", durationMs: 4 },
];

/** A collect function that counts its calls and can be held open or made to fail. */
export interface FakeCollector {
  /** The collect function. */
  collect: CollectFunction;
  /** How many times it was called. */
  readonly calls: number;
  /** Makes the next calls fail with this error (undefined: succeed again). */
  failWith: Error | undefined;
  /** When set, calls wait for {@link FakeCollector.release} before answering. */
  hold: boolean;
  /** Each call takes this long (like a real nvidia-smi run). */
  delayMs: number;
  /** Lets held calls answer. */
  release(): void;
  /** The signals passed to calls. */
  readonly signals: AbortSignal[];
}

/**
 * Creates a {@link FakeCollector}.
 *
 * @param result what a successful call returns
 * @returns the fake
 */
export function fakeCollector(
  result: CollectResult = { snapshot: sampleSnapshot(), reports: OK_REPORTS },
): FakeCollector {
  let calls = 0;
  let waiting: (() => void)[] = [];
  const signals: AbortSignal[] = [];
  const fake: FakeCollector = {
    get calls() {
      return calls;
    },
    failWith: undefined,
    hold: false,
    delayMs: 0,
    signals,
    release() {
      const list = waiting;
      waiting = [];
      for (const resolve of list) resolve();
    },
    async collect(signal) {
      calls += 1;
      signals.push(signal);
      if (fake.hold) {
        await new Promise<void>((resolve, reject) => {
          waiting.push(resolve);
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        });
      }
      if (fake.delayMs > 0) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, fake.delayMs);
          signal.addEventListener("abort", () => {
            clearTimeout(timer);
            reject(signal.reason);
          }, { once: true });
        });
      }
      if (fake.failWith) throw fake.failWith;
      return result;
    },
  };
  return fake;
}

/** Users of the fake authenticator, by token. */
export const TEST_USERS: Readonly<Record<string, UserInfo>> = {
  "token-reader": { username: "reader", groups: ["system:authenticated"] },
  "token-other": { username: "other", groups: ["system:authenticated"] },
  "token-prometheus": {
    username: "system:serviceaccount:monitoring:prometheus",
    groups: ["system:serviceaccounts"],
  },
};

/** A fake `TokenReview` and `SubjectAccessReview` pair that counts its calls. */
export interface FakeKubeAuth {
  /** Knows the {@link TEST_USERS} tokens. */
  authenticator: TokenAuthenticator;
  /** Allows `reader` snapshots and `prometheus` node metrics, nothing else. */
  authorizer: AccessAuthorizer;
  /** TokenReview calls. */
  reviews: number;
  /** SubjectAccessReview calls, with what they asked. */
  checks: { user: string; attributes: AccessAttributes }[];
}

/**
 * Creates a {@link FakeKubeAuth}.
 *
 * @returns the fake
 */
export function fakeKubeAuth(): FakeKubeAuth {
  const fake: FakeKubeAuth = {
    reviews: 0,
    checks: [],
    authenticator: {
      review(token) {
        fake.reviews += 1;
        const user = TEST_USERS[token];
        return Promise.resolve(user ? { authenticated: true, user } : { authenticated: false });
      },
    },
    authorizer: {
      allowed(user, attributes) {
        fake.checks.push({ user: user.username, attributes });
        const snapshot = attributes.group === "aicr.run" && attributes.resource === "snapshots";
        const metrics = attributes.resource === "nodes" && attributes.subresource === "metrics";
        return Promise.resolve(
          attributes.verb === "get" &&
            ((snapshot && user.username === "reader") ||
              (metrics && user.username.endsWith(":prometheus"))),
        );
      },
    },
  };
  return fake;
}

/** TLS material for tests: a CA and a server certificate for 127.0.0.1 and localhost. */
export interface TestTls {
  /** CA certificate (PEM), for clients to trust. */
  ca: string;
  /** Server certificate (PEM). */
  cert: string;
  /** Server key (PEM). */
  key: string;
}

/**
 * Generates a throwaway CA and a server certificate with the `openssl` CLI (tests only: the
 * agent image has no openssl; real daemons read a mounted Secret).
 *
 * @returns the PEM texts
 */
export function generateTestTls(): TestTls {
  const dir = mkdtempSync(join(tmpdir(), "aicr-tls-"));
  try {
    const run = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    run([
      "req",
      "-x509",
      ...ec,
      "-subj",
      "/CN=aicr-test-ca",
      "-days",
      "1",
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign",
    ]);
    run(["req", ...ec, "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "server.csr"]);
    writeFileSync(
      join(dir, "ext.cnf"),
      "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    );
    run([
      "x509",
      "-req",
      "-in",
      "server.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      "ext.cnf",
      "-out",
      "cert.pem",
    ]);
    const read = (name: string) => readFileSync(join(dir, name), "utf8");
    return { ca: read("ca.pem"), cert: read("cert.pem"), key: read("key.pem") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

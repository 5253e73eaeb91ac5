import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buffer } from "node:buffer";
import type https from "node:https";
import { clientNodeConnection, isNativelyCovered, nativeConnection } from "./connection.ts";
import type { KubeConnection } from "./connection.ts";
import { mergeKubeConfigs, selectContext } from "./kubeconfig.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");

/** What one request carries, as far as the server can tell: credentials and TLS settings. */
async function applied(connection: KubeConnection): Promise<Record<string, unknown>> {
  const options: https.RequestOptions = {};
  await connection.apply(options);
  const headers = (options.headers ?? {}) as Record<string, string>;
  const text = (value: unknown) => value === undefined ? undefined : String(value);
  return {
    server: connection.server,
    namespace: connection.namespace,
    authorization: headers.Authorization ?? headers.authorization,
    impersonate: headers["Impersonate-User"],
    auth: options.auth ?? undefined,
    ca: text(options.ca),
    cert: text(options.cert),
    key: text(options.key),
    verify: options.rejectUnauthorized !== false,
    servername: options.servername ?? undefined,
  };
}

/** One kubeconfig of a single context, from a cluster and a user entry. */
function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): unknown {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server: "https://10.0.0.1:6443", ...cluster } }],
    users: [{ name: "u", user }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "u", namespace: "team-a" } }],
    "current-context": "ctx",
  };
}

Deno.test("nativeConnection() applies what client-node applies, for every user and cluster it covers", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "aicr-connection-"));
  try {
    await writeFile(join(dir, "ca.crt"), "CA FILE PEM");
    await writeFile(join(dir, "tls.crt"), "CERT FILE PEM");
    await writeFile(join(dir, "tls.key"), "KEY FILE PEM");
    await writeFile(join(dir, "token"), "file-token\n");
    const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
      ["a bearer token, CA data", { "certificate-authority-data": b64("CA PEM") }, {
        token: "t0ken",
      }],
      ["a token file, CA file", { "certificate-authority": "ca.crt" }, { "token-file": "token" }],
      ["client certificate data", { "certificate-authority-data": b64("CA PEM") }, {
        "client-certificate-data": b64("CERT PEM"),
        "client-key-data": b64("KEY PEM"),
      }],
      ["client certificate files", { "certificate-authority": "ca.crt" }, {
        "client-certificate": "tls.crt",
        "client-key": "tls.key",
      }],
      ["basic auth, no verification", { "insecure-skip-tls-verify": true }, {
        username: "admin",
        password: "s3cret",
      }],
      ["impersonation, a TLS server name", {
        "certificate-authority-data": b64("CA PEM"),
        "tls-server-name": "kubernetes.default",
      }, { token: "t0ken", as: "alice" }],
    ];
    for (const [name, cluster, user] of cases) {
      await t.step(name, async () => {
        const merged = mergeKubeConfigs([{
          path: join(dir, "config"),
          document: kubeconfig(cluster, user),
        }]);
        const selected = selectContext(merged, undefined);
        assert.ok(isNativelyCovered(selected), "a case the narrow loader covers itself");
        assert.deepEqual(
          await applied(nativeConnection(selected)),
          await applied(await clientNodeConnection(selected)),
        );
      });
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

Deno.test("clientNodeConnection() names a missing exec plugin, its kubeconfig user and the fix, exit 3", async () => {
  const { exitCodeOf, formatError } = await import("../errors.ts");
  const connection = await clientNodeConnection(selectContext(
    mergeKubeConfigs([{
      path: "/eks.kubeconfig",
      document: kubeconfig({}, {
        exec: {
          apiVersion: "client.authentication.k8s.io/v1beta1",
          command: "aws-iam-nope-not-installed",
          args: ["token", "-i", "prod"],
          installHint:
            "Install aws-iam-authenticator for use with kubectl by following\nhttps://docs.aws.amazon.com/eks/",
        },
      }),
    }]),
    undefined,
  ));
  const error = await applied(connection).catch((e) => e);
  assert.equal(exitCodeOf(error), 3);
  const text = formatError(error);
  assert.match(
    text,
    /^error: Cannot get credentials for kubeconfig user 'u' \(context 'ctx'\): its exec plugin 'aws-iam-nope-not-installed' is not installed or not on PATH/,
  );
  assert.match(text, /\n {2}Install aws-iam-authenticator for use with kubectl by following\n/);
  assert.match(text, /kubectl --context ctx auth whoami/);
  assert.doesNotMatch(text, /internal/);
});

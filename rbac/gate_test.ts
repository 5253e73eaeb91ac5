import assert from "node:assert/strict";
import { formatError, PermissionError, ToolError, UnavailableError } from "../errors.ts";
import { createLogger } from "../log.ts";
import { callerChecks, formatDenial, isConnectionError, runGate } from "./gate.ts";
import type { AccessReviewer } from "./gate.ts";
import { qualifiedResource } from "./rules.ts";
import type { AccessAttributes } from "./rules.ts";

function key(a: AccessAttributes): string {
  return `${a.verb} ${qualifiedResource(a)}${a.name ? `/${a.name}` : ""} ${a.namespace ?? "*"}`;
}

interface FakeOptions {
  /** Caller questions denied, as `verb resource ns|*`. */
  callerDenied?: string[];
  /** Agent questions denied. */
  agentDenied?: string[];
  /** SubjectAccessReview creation forbidden. */
  sarForbidden?: boolean;
  /** Thrown by every selfReview. */
  selfError?: unknown;
}

function fakeReviewer(options: FakeOptions = {}) {
  const calls: { self: string[]; subject: { user: string; groups: string[]; q: string }[] } = {
    self: [],
    subject: [],
  };
  let inFlight = 0;
  let maxInFlight = 0;
  async function track<T>(fn: () => T): Promise<T> {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 1));
    inFlight--;
    return fn();
  }
  const reviewer: AccessReviewer = {
    selfReview(attributes) {
      calls.self.push(key(attributes));
      return track(() => {
        if (options.selfError !== undefined) throw options.selfError;
        return options.callerDenied?.includes(key(attributes))
          ? { allowed: false, reason: "RBAC: no rule" }
          : { allowed: true };
      });
    },
    subjectReview(user, groups, attributes) {
      calls.subject.push({ user, groups, q: key(attributes) });
      return track(() => {
        if (options.sarForbidden) {
          throw new PermissionError(
            "Cannot create subjectaccessreviews.authorization.k8s.io: forbidden",
          );
        }
        return { allowed: !options.agentDenied?.includes(key(attributes)) };
      });
    },
  };
  return { reviewer, calls, maxInFlight: () => maxInFlight };
}

function captureLog() {
  const lines: string[] = [];
  return { lines, log: createLogger({ write: (t) => void lines.push(t) }, { level: "debug" }) };
}

const FIRST_GROUP = [
  "get serviceaccounts ns",
  "create jobs.batch ns",
  "get jobs.batch ns",
  "list jobs.batch ns",
  "watch jobs.batch ns",
  "delete jobs.batch ns",
  "get pods ns",
  "list pods ns",
  "watch pods ns",
  "get pods/log ns",
  "get configmaps ns",
  "list configmaps ns",
];
const SECOND_GROUP = [
  "create serviceaccounts ns",
  "delete serviceaccounts ns",
  "create roles.rbac.authorization.k8s.io ns",
  "delete roles.rbac.authorization.k8s.io ns",
  "create rolebindings.rbac.authorization.k8s.io ns",
  "delete rolebindings.rbac.authorization.k8s.io ns",
  "create clusterroles.rbac.authorization.k8s.io *",
  "delete clusterroles.rbac.authorization.k8s.io *",
  "create clusterrolebindings.rbac.authorization.k8s.io *",
  "delete clusterrolebindings.rbac.authorization.k8s.io *",
];

Deno.test("gate: prefix mode owning the output asks both groups and configmaps create, delete", () => {
  const checks = callerChecks({ mode: "prefix", ownsOutput: true, namespace: "ns" }).map(key);
  assert.deepEqual(checks, [
    ...FIRST_GROUP,
    "create configmaps ns",
    "delete configmaps ns",
    ...SECOND_GROUP,
  ]);
});

Deno.test("gate: prefix mode with a user cm:// output asks both groups without configmaps delete", () => {
  const checks = callerChecks({ mode: "prefix", ownsOutput: false, namespace: "ns" }).map(key);
  assert.deepEqual(checks, [...FIRST_GROUP, ...SECOND_GROUP]);
});

Deno.test("gate: exact mode owning the output asks only the first group and configmaps create, delete", () => {
  const checks = callerChecks({ mode: "exact", ownsOutput: true, namespace: "ns" }).map(key);
  assert.deepEqual(checks, [...FIRST_GROUP, "create configmaps ns", "delete configmaps ns"]);
});

Deno.test("gate: exact mode with a user cm:// output asks only the first group", () => {
  const checks = callerChecks({ mode: "exact", ownsOutput: false, namespace: "ns" }).map(key);
  assert.deepEqual(checks, FIRST_GROUP);
});

Deno.test("gate: cluster-scoped questions carry no namespace, subresources are split", () => {
  const checks = callerChecks({ mode: "prefix", ownsOutput: false, namespace: "ns" });
  assert.deepEqual(checks.find((c) => c.subresource === "log"), {
    verb: "get",
    group: "",
    resource: "pods",
    subresource: "log",
    namespace: "ns",
  });
  assert.deepEqual(checks.at(-1), {
    verb: "delete",
    group: "rbac.authorization.k8s.io",
    resource: "clusterrolebindings",
  });
});

Deno.test("gate: prefix mode asks only the caller and never the ServiceAccount", async () => {
  const fake = fakeReviewer();
  const { lines, log } = captureLog();
  const report = await runGate(fake.reviewer, {
    namespace: "ns",
    mode: "prefix",
    serviceAccount: "aicr",
    ownsOutput: true,
    log,
  });
  assert.equal(fake.calls.self.length, 24);
  assert.equal(fake.calls.subject.length, 0);
  assert.deepEqual(report, {
    callerChecked: 24,
    serviceAccountChecked: 0,
    serviceAccountUnchecked: 0,
  });
  assert.deepEqual(lines, []);
});

Deno.test("gate: exact mode asks the ServiceAccount the 20 rule-set questions as its user and groups", async () => {
  const fake = fakeReviewer();
  const { log } = captureLog();
  const report = await runGate(fake.reviewer, {
    namespace: "gpu-operator",
    mode: "exact",
    serviceAccount: "irsa-snapshotter",
    ownsOutput: false,
    configMaps: { target: "aicr-snapshot" },
    log,
  });
  assert.equal(fake.calls.subject.length, 20);
  assert.deepEqual(report, {
    callerChecked: 12,
    serviceAccountChecked: 20,
    serviceAccountUnchecked: 0,
  });
  const first = fake.calls.subject[0];
  assert.equal(first?.user, "system:serviceaccount:gpu-operator:irsa-snapshotter");
  assert.deepEqual(first?.groups, [
    "system:serviceaccounts",
    "system:serviceaccounts:gpu-operator",
    "system:authenticated",
  ]);
  assert.deepEqual(fake.calls.subject.map((c) => c.q).slice(0, 7), [
    "create configmaps gpu-operator",
    "get configmaps/aicr-snapshot gpu-operator",
    "update configmaps/aicr-snapshot gpu-operator",
    "patch configmaps/aicr-snapshot gpu-operator",
    "get pods gpu-operator",
    "list pods gpu-operator",
    "get nodes *",
  ]);
});

Deno.test("gate: exact mode with --discover-network asks the widened rule set", async () => {
  const fake = fakeReviewer();
  await runGate(fake.reviewer, {
    namespace: "ns",
    mode: "exact",
    serviceAccount: "sa",
    ownsOutput: true,
    discoverNetwork: true,
    configMaps: { staging: "aicr-agent-snapshot-sa" },
    log: captureLog().log,
  });
  // The staging ConfigMap's get and update (no create), the pods, the cluster rules.
  assert.equal(fake.calls.subject.length, 47);
  assert.ok(fake.calls.subject.some((c) => c.q === "update configmaps/aicr-agent-snapshot-sa ns"));
  assert.ok(!fake.calls.subject.some((c) => c.q === "create configmaps ns"));
  assert.ok(fake.calls.subject.some((c) => c.q === "create pods/exec *"));
  assert.ok(fake.calls.subject.some((c) => c.q === "patch nodes *"));
});

Deno.test("gate: every denial of both identities comes back in one error, in the documented format", async () => {
  const fake = fakeReviewer({
    callerDenied: ["delete clusterroles.rbac.authorization.k8s.io *", "get pods/log gpu-operator"],
    agentDenied: [
      "list nodes *",
      "update configmaps/aicr-agent-snapshot-irsa-snapshotter gpu-operator",
    ],
  });
  // Exact mode does not ask for clusterroles, so deny one of its own questions too.
  const error = await runGate(fake.reviewer, {
    namespace: "gpu-operator",
    mode: "exact",
    serviceAccount: "irsa-snapshotter",
    ownsOutput: true,
    configMaps: { staging: "aicr-agent-snapshot-irsa-snapshotter" },
    log: captureLog().log,
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof PermissionError);
  assert.equal(error.exitCode, 4);
  // The list ends with the fix: render the grant, apply it, run as that ServiceAccount.
  assert.deepEqual(error.details, [
    'fix: grant ServiceAccount "irsa-snapshotter" the agent\'s rules, or have an admin do it:',
    "  aicr snapshot --namespace gpu-operator --add-roles-to-service-account irsa-snapshotter   # writes snapshot-rbac-<runID>/, applies nothing",
    "  kubectl apply -f snapshot-rbac-<runID>/",
    "  aicr snapshot --namespace gpu-operator --service-account-name irsa-snapshotter",
  ]);
  assert.match(
    formatError(error),
    /\n {2}aicr snapshot --namespace gpu-operator --service-account-name irsa-snapshotter$/,
  );
  assert.equal(
    error.message,
    [
      "missing required permissions:",
      '- the caller (your kubeconfig identity) cannot "get" pods/log (namespace "gpu-operator")',
      '- agent ServiceAccount "system:serviceaccount:gpu-operator:irsa-snapshotter" cannot "update" configmaps "aicr-agent-snapshot-irsa-snapshotter" (namespace "gpu-operator")',
      '- agent ServiceAccount "system:serviceaccount:gpu-operator:irsa-snapshotter" cannot "list" nodes (cluster-scoped)',
    ].join("\n"),
  );
});

Deno.test("gate: the documented example error comes out byte for byte", async () => {
  const fake = fakeReviewer({
    callerDenied: ["delete clusterroles.rbac.authorization.k8s.io *"],
    agentDenied: ["list nodes *"],
  });
  // The doc's example mixes a prefix-mode caller line with an exact-mode agent line; show each
  // line comes out exactly from the mode that asks it.
  const prefix = await runGate(fake.reviewer, {
    namespace: "gpu-operator",
    mode: "prefix",
    serviceAccount: "aicr",
    ownsOutput: true,
    log: captureLog().log,
  }).catch((e: Error) => e.message);
  assert.equal(
    prefix,
    'missing required permissions:\n- the caller (your kubeconfig identity) cannot "delete" clusterroles.rbac.authorization.k8s.io (cluster-scoped)',
  );
  assert.equal(
    formatDenial(
      { kind: "serviceAccount", user: "system:serviceaccount:gpu-operator:irsa-snapshotter" },
      { verb: "list", group: "", resource: "nodes" },
    ),
    '- agent ServiceAccount "system:serviceaccount:gpu-operator:irsa-snapshotter" cannot "list" nodes (cluster-scoped)',
  );
  assert.equal(
    formatDenial({ kind: "caller" }, {
      verb: "create",
      group: "batch",
      resource: "jobs",
      namespace: "gpu-operator",
    }),
    '- the caller (your kubeconfig identity) cannot "create" jobs.batch (namespace "gpu-operator")',
  );
});

Deno.test("gate: a forbidden SubjectAccessReview logs the documented WARN and the run goes on", async () => {
  const fake = fakeReviewer({ sarForbidden: true });
  const { lines, log } = captureLog();
  const report = await runGate(fake.reviewer, {
    namespace: "gpu-operator",
    mode: "exact",
    serviceAccount: "irsa-snapshotter",
    ownsOutput: false,
    configMaps: { target: "aicr-snapshot" },
    log,
  });
  assert.deepEqual(report, {
    callerChecked: 12,
    serviceAccountChecked: 0,
    serviceAccountUnchecked: 20,
  });
  // The line in the docs, byte for byte.
  assert.deepEqual(lines, [
    `WARN could not verify the agent ServiceAccount's own permissions; continuing, but a missing rule will surface as an in-pod failure minutes from now instead of here serviceAccount=irsa-snapshotter namespace=gpu-operator uncheckedRules=20 remedy="grant the caller 'create subjectaccessreviews.authorization.k8s.io', or verify by hand with: kubectl auth can-i --list --as system:serviceaccount:gpu-operator:irsa-snapshotter"\n`,
  ]);
});

Deno.test("gate: a forbidden SubjectAccessReview does not hide the caller's denials", async () => {
  const fake = fakeReviewer({ sarForbidden: true, callerDenied: ["watch jobs.batch ns"] });
  const { lines, log } = captureLog();
  await assert.rejects(
    runGate(fake.reviewer, {
      namespace: "ns",
      mode: "exact",
      serviceAccount: "sa",
      ownsOutput: false,
      log,
    }),
    {
      name: "PermissionError",
      message:
        'missing required permissions:\n- the caller (your kubeconfig identity) cannot "watch" jobs.batch (namespace "ns")',
    },
  );
  // The authorizer's reason goes to the debug log; the WARN is logged once.
  assert.deepEqual(lines.map((l) => l.split(" ").slice(0, 3).join(" ")), [
    "DEBUG permission denied",
    "WARN could not",
  ]);
  assert.match(lines[0] ?? "", /verb=watch resource=jobs.batch reason="RBAC: no rule"/);
});

Deno.test("gate: an unreachable API server is UNAVAILABLE, not a denial", async () => {
  const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6443"), {
    code: "ECONNREFUSED",
  });
  const fake = fakeReviewer({ selfError: new TypeError("fetch failed", { cause: refused }) });
  const error = await runGate(fake.reviewer, {
    namespace: "ns",
    mode: "prefix",
    serviceAccount: "aicr",
    ownsOutput: true,
    log: captureLog().log,
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof UnavailableError);
  assert.equal(error.exitCode, 6);
  assert.match(
    error.message,
    /^Cannot check permission "get" serviceaccounts as the Kubernetes API server is unreachable: /,
  );
  assert.ok(error.details.includes("Is your VPN connected?"));
});

Deno.test("gate: another review failure is internal and keeps its cause; a ToolError passes through", async () => {
  const boom = new Error("unexpected status 500");
  const error = await runGate(fakeReviewer({ selfError: boom }).reviewer, {
    namespace: "ns",
    mode: "exact",
    serviceAccount: "sa",
    ownsOutput: false,
    log: captureLog().log,
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof ToolError);
  assert.equal(error.code, "internal");
  assert.equal(error.cause, boom);
  const own = new UnavailableError("Cannot reach the API server: x");
  await assert.rejects(
    runGate(fakeReviewer({ selfError: own }).reviewer, {
      namespace: "ns",
      mode: "exact",
      serviceAccount: "sa",
      ownsOutput: false,
      log: captureLog().log,
    }),
    (e: unknown) => e === own,
  );
});

Deno.test("gate: reviews run concurrently but never more than the bound", async () => {
  const fake = fakeReviewer();
  await runGate(fake.reviewer, {
    namespace: "ns",
    mode: "exact",
    serviceAccount: "sa",
    ownsOutput: true,
    log: captureLog().log,
    concurrency: 4,
  });
  assert.equal(fake.maxInFlight(), 4);
});

Deno.test("gate: connection errors are told from other errors", () => {
  assert.ok(isConnectionError(new Error("dial tcp 10.0.0.1:443: i/o timeout")));
  assert.ok(isConnectionError(Object.assign(new Error("x"), { code: "ENOTFOUND" })));
  assert.ok(!isConnectionError(new Error("context deadline exceeded")));
  assert.ok(!isConnectionError("ECONNREFUSED as a string is not an Error"));
});

Deno.test("gate: creatorChecks asks create, get, list and delete per created kind, then every granted rule, once each", async () => {
  const { creatorChecks: checks } = await import("./gate.ts");
  const { DAEMON_READER_RULES } = await import("./rules.ts");
  const questions = checks({
    creates: [
      { group: "apps", resource: "daemonsets", namespace: "ns" },
      { group: "rbac.authorization.k8s.io", resource: "clusterroles" },
      { group: "apps", resource: "daemonsets", namespace: "ns" },
    ],
    grants: [{ namespaced: [], cluster: DAEMON_READER_RULES }],
    namespace: "ns",
    extra: [{ verb: "list", group: "", resource: "pods", namespace: "ns" }],
  }).map(key);
  assert.deepEqual(questions, [
    "create daemonsets.apps ns",
    "get daemonsets.apps ns",
    "list daemonsets.apps ns",
    "delete daemonsets.apps ns",
    "create clusterroles.rbac.authorization.k8s.io *",
    "get clusterroles.rbac.authorization.k8s.io *",
    "list clusterroles.rbac.authorization.k8s.io *",
    "delete clusterroles.rbac.authorization.k8s.io *",
    "get snapshots.aicr.run *",
    "list nodes *",
    "list pods ns",
  ]);
});

Deno.test("gate: runGate with its own caller questions reports every denial in one error", async () => {
  const { reviewer, calls } = fakeReviewer({
    callerDenied: ["create daemonsets.apps ns", "get snapshots.aicr.run *"],
  });
  const caller: AccessAttributes[] = [
    { verb: "create", group: "apps", resource: "daemonsets", namespace: "ns" },
    { verb: "get", group: "aicr.run", resource: "snapshots" },
    { verb: "list", group: "", resource: "pods", namespace: "ns" },
  ];
  const error = await runGate(reviewer, {
    namespace: "ns",
    mode: "prefix",
    serviceAccount: "",
    ownsOutput: false,
    caller,
    log: createLogger({ write: () => {} }),
  }).catch((e) => e);
  assert.ok(error instanceof PermissionError);
  assert.equal(
    error.message,
    [
      "missing required permissions:",
      '- the caller (your kubeconfig identity) cannot "create" daemonsets.apps (namespace "ns")',
      '- the caller (your kubeconfig identity) cannot "get" snapshots.aicr.run (cluster-scoped)',
    ].join("\n"),
  );
  assert.equal(calls.self.length, 3);
  assert.equal(calls.subject.length, 0);
});

Deno.test("callerChecks() asks 'patch configmaps' only when the CLI rewrites the user's output", () => {
  const patches = (rewritesOutput: boolean) =>
    callerChecks({ mode: "exact", ownsOutput: false, namespace: "ns", rewritesOutput })
      .filter((a) => a.resource === "configmaps" && a.verb === "patch").length;
  assert.equal(patches(false), 0);
  assert.equal(patches(true), 1);
});

Deno.test("gate: a caller who may not even ask about its own permissions is stopped, never waved through as unchecked", async () => {
  const forbidden = new PermissionError(
    "Cannot create selfsubjectaccessreviews.authorization.k8s.io: forbidden",
  );
  const captured = captureLog();
  const error = await runGate(fakeReviewer({ selfError: forbidden }).reviewer, {
    namespace: "ns",
    mode: "exact",
    serviceAccount: "sa",
    ownsOutput: true,
    log: captured.log,
  }).then(() => undefined, (e: unknown) => e);
  assert.equal(error, forbidden);
  assert.ok(!captured.lines.some((l) => l.includes("could not verify")), captured.lines.join(""));
});

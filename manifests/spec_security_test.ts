/**
 * The spec's pod security settings, field by field, independent of the golden files: every row
 * quotes the spec (`testdata/spec-pod-security.md`, a verbatim excerpt of the upstream docs and
 * implementation notes) and reads one field of the built agent Job and DaemonSet. A row whose
 * quote is not in the excerpt fails, so the expectations cannot drift from the spec's text; a
 * manifest change that breaks a setting fails here even when someone rewrote the golden files.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { buildAgentJob } from "./job.ts";
import { buildDaemonSet } from "./daemonset.ts";
import { NODE_OS_FAMILIES } from "./_pod.ts";
import type { PodSpec } from "./types.ts";

/** The excerpt with every run of white space as one space (the formatter re-wraps its lines). */
const SPEC = readFileSync(new URL("./testdata/spec-pod-security.md", import.meta.url), "utf8")
  .replace(/\s+/g, " ");

/** One setting: the spec's words, the field, and the value they require. */
interface Row {
  /** A fragment of the spec excerpt, verbatim. */
  quote: string;
  /** The field, for the failure message. */
  field: string;
  /** Reads the field from a pod spec. */
  read: (pod: PodSpec) => unknown;
  /** What the spec requires. */
  want: unknown;
}

function container(pod: PodSpec) {
  assert.equal(pod.containers.length, 1, "one container");
  return pod.containers[0]!;
}

function volume(pod: PodSpec, name: string) {
  return pod.volumes.find((v) => v.name === name);
}

function mount(pod: PodSpec, name: string) {
  return container(pod).volumeMounts.find((m) => m.name === name);
}

const ALWAYS: Row[] = [
  {
    quote: "Volumes: `tmp` emptyDir mounted at `/tmp`, always.",
    field: "volumes[tmp].emptyDir",
    read: (pod) => volume(pod, "tmp")?.emptyDir,
    want: {},
  },
  {
    quote: "Volumes: `tmp` emptyDir mounted at `/tmp`, always.",
    field: "volumeMounts[tmp].mountPath",
    read: (pod) => mount(pod, "tmp")?.mountPath,
    want: "/tmp",
  },
];

const PRIVILEGED: Row[] = [
  ...ALWAYS,
  {
    quote: "`hostPID`, `hostNetwork`, `hostIPC`: Required to read host system configuration",
    field: "hostPID",
    read: (pod) => pod.hostPID,
    want: true,
  },
  {
    quote: "Pod: `hostPID: true`, `hostNetwork: true`, `hostIPC: true`",
    field: "hostNetwork",
    read: (pod) => pod.hostNetwork,
    want: true,
  },
  {
    quote: "Pod: `hostPID: true`, `hostNetwork: true`, `hostIPC: true`",
    field: "hostIPC",
    read: (pod) => pod.hostIPC,
    want: true,
  },
  {
    quote: "pod securityContext `runAsUser 0`",
    field: "securityContext.runAsUser",
    read: (pod) => pod.securityContext.runAsUser,
    want: 0,
  },
  {
    quote: "`runAsUser 0`, `runAsGroup 0`, `fsGroup 0`",
    field: "securityContext.runAsGroup",
    read: (pod) => pod.securityContext.runAsGroup,
    want: 0,
  },
  {
    quote: "`fsGroup 0`",
    field: "securityContext.fsGroup",
    read: (pod) => pod.securityContext.fsGroup,
    want: 0,
  },
  {
    quote: "`fsGroupChangePolicy OnRootMismatch`",
    field: "securityContext.fsGroupChangePolicy",
    read: (pod) => pod.securityContext.fsGroupChangePolicy,
    want: "OnRootMismatch",
  },
  {
    quote: "`privileged` + `SYS_ADMIN`: Required to access GPU configuration",
    field: "containers[0].securityContext.privileged",
    read: (pod) => container(pod).securityContext.privileged,
    want: true,
  },
  {
    quote: "Container securityContext: `privileged: true`, `runAsUser 0`, `runAsGroup 0`",
    field: "containers[0].securityContext.runAsUser",
    read: (pod) => container(pod).securityContext.runAsUser,
    want: 0,
  },
  {
    quote: "Container securityContext: `privileged: true`, `runAsUser 0`, `runAsGroup 0`",
    field: "containers[0].securityContext.runAsGroup",
    read: (pod) => container(pod).securityContext.runAsGroup,
    want: 0,
  },
  {
    quote: "`allowPrivilegeEscalation: true`",
    field: "containers[0].securityContext.allowPrivilegeEscalation",
    read: (pod) => container(pod).securityContext.allowPrivilegeEscalation,
    want: true,
  },
  {
    quote: "capabilities add `SYS_ADMIN` and `SYS_CHROOT`.",
    field: "containers[0].securityContext.capabilities",
    read: (pod) => container(pod).securityContext.capabilities,
    want: { add: ["SYS_ADMIN", "SYS_CHROOT"] },
  },
  {
    quote: "`run-systemd`: hostPath `/run/systemd`, type Directory",
    field: "volumes[run-systemd].hostPath",
    read: (pod) => volume(pod, "run-systemd")?.hostPath,
    want: { path: "/run/systemd", type: "Directory" },
  },
  {
    quote: "type Directory, mounted read-only at `/run/systemd`;",
    field: "volumeMounts[run-systemd]",
    read: (pod) => mount(pod, "run-systemd"),
    want: { name: "run-systemd", mountPath: "/run/systemd", readOnly: true },
  },
  {
    quote: "`host-os-release`: hostPath `/etc/os-release`, type File",
    field: "volumes[host-os-release].hostPath",
    read: (pod) => volume(pod, "host-os-release")?.hostPath,
    want: { path: "/etc/os-release", type: "File" },
  },
  {
    quote: "type File, mounted read-only at `/etc/os-release`.",
    field: "volumeMounts[host-os-release]",
    read: (pod) => mount(pod, "host-os-release"),
    want: { name: "host-os-release", mountPath: "/etc/os-release", readOnly: true },
  },
];

const RESTRICTED: Row[] = [
  ...ALWAYS,
  ...(["hostPID", "hostNetwork", "hostIPC"] as const).map((field): Row => ({
    quote: "No host namespaces and no hostPath.",
    field,
    read: (pod) => pod[field] ?? false,
    want: false,
  })),
  {
    quote: "No host namespaces and no hostPath.",
    field: "volumes[*].hostPath",
    read: (pod) => pod.volumes.filter((v) => v.hostPath !== undefined).map((v) => v.name),
    want: [],
  },
  {
    quote: "Pod securityContext: `runAsNonRoot: true`, uid/gid/fsGroup `65534`",
    field: "securityContext (runAsNonRoot, uid, gid, fsGroup)",
    read: ({ securityContext: s }) => [s.runAsNonRoot, s.runAsUser, s.runAsGroup, s.fsGroup],
    want: [true, 65534, 65534, 65534],
  },
  {
    quote: "uid/gid/fsGroup `65534`, seccomp `RuntimeDefault`.",
    field: "securityContext.seccompProfile",
    read: (pod) => pod.securityContext.seccompProfile,
    want: { type: "RuntimeDefault" },
  },
  {
    quote: "Container securityContext: `privileged: false`, `runAsNonRoot`, uid/gid 65534",
    field: "containers[0].securityContext (privileged, runAsNonRoot, uid, gid)",
    read: (pod) => {
      const s = container(pod).securityContext;
      return [s.privileged, s.runAsNonRoot, s.runAsUser, s.runAsGroup];
    },
    want: [false, true, 65534, 65534],
  },
  {
    quote: "`allowPrivilegeEscalation: false`, `readOnlyRootFilesystem: true`",
    field: "containers[0].securityContext (allowPrivilegeEscalation, readOnlyRootFilesystem)",
    read: (pod) => {
      const s = container(pod).securityContext;
      return [s.allowPrivilegeEscalation, s.readOnlyRootFilesystem];
    },
    want: [false, true],
  },
  {
    quote: "capabilities drop `ALL`, seccomp `RuntimeDefault`.",
    field: "containers[0].securityContext (capabilities, seccompProfile)",
    read: (pod) => {
      const s = container(pod).securityContext;
      return [s.capabilities, s.seccompProfile];
    },
    want: [{ drop: ["ALL"] }, { type: "RuntimeDefault" }],
  },
];

function assertRows(what: string, pod: PodSpec, rows: readonly Row[]): void {
  for (const row of rows) {
    assert.ok(SPEC.includes(row.quote), `the spec excerpt says ${JSON.stringify(row.quote)}`);
    assert.deepEqual(row.read(pod), row.want, `${what}: ${row.field} (spec: "${row.quote}")`);
  }
}

const JOB = {
  namespace: "gpu-operator",
  runId: "20260103-103000-0123456789abcdef",
  invocationId: "fedcba9876543210",
  serviceAccountName: "aicr-20260103-103000-0123456789abcdef",
  image: "ghcr.io/nvidia/aicr:v0.1.0",
};
const DAEMONSET = {
  namespace: "aicr-system",
  image: "ghcr.io/nvidia/aicr:v0.1.0",
  tls: { secretName: "aicr-daemon-tls" },
};

Deno.test("spec security: the default agent Job is privileged as the spec says, field by field", () => {
  assertRows("Job", buildAgentJob(JOB).spec.template.spec, PRIVILEGED);
  assertRows(
    "Job --require-gpu",
    buildAgentJob({ ...JOB, requireGpu: true }).spec.template.spec,
    PRIVILEGED,
  );
  assertRows(
    "Job --runtime-class",
    buildAgentJob({ ...JOB, runtimeClass: "nvidia" }).spec.template.spec,
    PRIVILEGED,
  );
});

Deno.test("spec security: the --privileged=false Job is PSS restricted as the spec says, field by field", () => {
  assertRows("Job", buildAgentJob({ ...JOB, privileged: false }).spec.template.spec, RESTRICTED);
});

Deno.test("spec security: the default DaemonSet pod has the agent's privileged settings, field by field", () => {
  assertRows("DaemonSet", buildDaemonSet(DAEMONSET).spec.template.spec, PRIVILEGED);
});

Deno.test("spec security: the --privileged=false DaemonSet pod has the restricted settings, field by field", () => {
  assertRows(
    "DaemonSet",
    buildDaemonSet({ ...DAEMONSET, privileged: false }).spec.template.spec,
    RESTRICTED,
  );
});

Deno.test("spec security: every --os keeps the posture; only Talos (no systemd) drops the /run/systemd mount", () => {
  const systemdRows = new Set(["volumes[run-systemd].hostPath", "volumeMounts[run-systemd]"]);
  for (const os of NODE_OS_FAMILIES) {
    const rows = os === "talos" ? PRIVILEGED.filter((r) => !systemdRows.has(r.field)) : PRIVILEGED;
    assertRows(`Job --os ${os}`, buildAgentJob({ ...JOB, os }).spec.template.spec, rows);
    assertRows(
      `DaemonSet --os ${os}`,
      buildDaemonSet({ ...DAEMONSET, os }).spec.template.spec,
      rows,
    );
  }
  const talos = buildAgentJob({ ...JOB, os: "talos" }).spec.template.spec;
  assert.equal(volume(talos, "run-systemd"), undefined, "Talos runs no systemd to mount");
});

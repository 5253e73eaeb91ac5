/**
 * The Helm chart `charts/aicr/`, generated from the builders `aicr daemonset render` uses: every
 * object template comes from `renderDaemonSet` rendered once per value of each chart knob (see
 * `template.ts`), the alert rules and the dashboard from `manifests/monitoring.ts`, the values'
 * defaults from a default render. `deno task chart` writes the chart; `tests/chart/` checks the
 * files are what this module makes, and that `helm template` gives what `render` gives.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { stringify } from "yaml";
import { renderDaemonSet } from "../../controller/mod.ts";
import type { DaemonSetOptions } from "../../controller/mod.ts";
import type { RenderedObject } from "../../controller/render.ts";
import {
  baselineLabels,
  daemonCaConfigMapName,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  DEFAULT_DAEMON_PORT,
  GPU_PRESENT_LABEL,
  NODE_OS_FAMILIES,
} from "../../manifests/mod.ts";
import { daemonAlertRules, daemonDashboard, DASHBOARD_UID } from "../../manifests/monitoring.ts";
import { DEFAULT_DAEMON_READER_NAME } from "../../manifests/names.ts";
import { DEFAULT_SIGNER_REPLICAS } from "../../manifests/signer.ts";
import type { Affinity } from "../../manifests/mod.ts";
import { baselinePlaceholderName } from "../../snapshot/mod.ts";
import { RELEASE_PLATFORMS, releaseImage } from "../../version.ts";
import { platformArchitectures } from "../../cli/_image.ts";
import {
  emitDoc,
  mergeDocs,
  nodeKey,
  type Substitutions,
  type TDoc,
  type TEntry,
  type TMap,
  type TNode,
  toTemplate,
} from "./template.ts";

/** Sentinels: values no real install uses, each found and replaced after rendering. */
const S = {
  name: "zqname",
  namespace: "zqns",
  image: "zqimage",
  pullSecret: "zqpullsecret",
  nodeSelector: "zqnodeselector",
  toleration: "zqtoleration",
  runtimeClass: "zqruntimeclass",
  priorityClass: "zqpriorityclass",
  affinity: "zqaffinity",
  architecture: "zqarch",
  port: 47123,
  // Within the builder's 1 to 10, and no other number of the render (checked: 0 1 2 3 5 10 20 30 100).
  signerReplicas: 9,
  interval: "4713s",
  requests: { cpu: "4711m", memory: "4711Ki", "ephemeral-storage": "4711Ki" },
  limits: { cpu: "4712m", memory: "4712Ki", "ephemeral-storage": "4712Ki" },
} as const;

/** A placeholder CA for the renders: its data is replaced by the chart's own CA expressions. */
const PLACEHOLDER_CA = { caCert: "zqcacert", caKey: "zqcakey" };

/** One knob of the chart: a Helm test and the options of each side. */
interface Knob {
  /** Values of this knob, each with its Helm test (the last one's is never written: else). */
  cases: { test: string; options: Partial<RenderInput> }[];
}

/** What a render varies: the daemon's options the chart exposes. */
interface RenderInput {
  /** A selector given (the user's whole), none given (GPU nodes), or every node. */
  selector: "given" | "gpu" | "all";
  signer: boolean;
  service: boolean;
  serviceMonitor: boolean;
  privileged: boolean;
  os: string;
  runtimeClass: boolean;
  nodeBoundTokens: boolean;
  architectures: boolean;
  priorityClass: boolean;
  affinity: boolean;
}

function bool(test: string, key: keyof RenderInput): Knob {
  return {
    cases: [{ test, options: { [key]: true } }, {
      test: `not (${test})`,
      options: { [key]: false },
    }],
  };
}

/**
 * The knobs, outermost first. The order only shapes the templates (outer tests wrap inner
 * ones); every combination is rendered.
 */
const KNOBS: Knob[] = [
  bool(".Values.signer.enabled", "signer"),
  bool(".Values.service.enabled", "service"),
  bool(".Values.serviceMonitor.enabled", "serviceMonitor"),
  bool(".Values.privileged", "privileged"),
  {
    cases: ["", ...NODE_OS_FAMILIES].map((os) => ({
      test: `eq .Values.os ${JSON.stringify(os)}`,
      options: { os },
    })),
  },
  {
    // As the CLI: a selector given wins; without one, GPU nodes unless allNodes.
    cases: [
      { test: ".Values.nodeSelector", options: { selector: "given" } },
      { test: "not .Values.allNodes", options: { selector: "gpu" } },
      { test: ".Values.allNodes", options: { selector: "all" } },
    ],
  },
  bool(".Values.runtimeClassName", "runtimeClass"),
  bool(".Values.requireNodeBoundToken", "nodeBoundTokens"),
  bool(".Values.architectures", "architectures"),
  bool(".Values.priorityClassName", "priorityClass"),
  // Given whole, as the builders take it: it replaces the architectures' affinity.
  bool(".Values.affinity", "affinity"),
];

const IMAGE_EXPR = 'printf "%s:%s" .Values.image.repository (toString .Values.image.tag)';

/** The sentinels' Helm expressions. */
const SUBSTITUTIONS: Substitutions = {
  exact: [
    { value: S.image, expr: IMAGE_EXPR },
    // The default daemon's reader is `aicr-reader`, another's `<name>-reader` (names.ts).
    { value: `${S.name}-reader`, expr: 'include "aicr.readerName" .' },
  ],
  strings: [
    { sentinel: S.name, expr: ".Values.name" },
    { sentinel: S.namespace, expr: ".Release.Namespace" },
    { sentinel: S.runtimeClass, expr: ".Values.runtimeClassName" },
    { sentinel: S.priorityClass, expr: ".Values.priorityClassName" },
    { sentinel: S.interval, expr: ".Values.baselineInterval" },
  ],
  numbers: [
    { sentinel: S.port, expr: ".Values.port" },
    { sentinel: S.signerReplicas, expr: ".Values.signer.replicas" },
  ],
  blocks: [
    { sentinel: S.pullSecret, expr: ".Values.imagePullSecrets" },
    { sentinel: S.nodeSelector, expr: ".Values.nodeSelector" },
    { sentinel: S.toleration, expr: ".Values.tolerations" },
    { sentinel: S.architecture, expr: ".Values.architectures" },
    { sentinel: S.affinity, expr: ".Values.affinity" },
  ],
};

/** The render options of one combination of knob values, sentinels everywhere else. */
function renderOptions(input: RenderInput): Parameters<typeof renderDaemonSet>[0] {
  return {
    namespace: S.namespace,
    name: S.name,
    port: S.port,
    image: S.image,
    privileged: input.privileged,
    ...(input.selector === "given" ? { nodeSelector: { [S.nodeSelector]: "x" } } : {}),
    allNodes: input.selector === "all",
    tolerations: [{ key: S.toleration, operator: "Exists" }],
    imagePullSecrets: [S.pullSecret],
    ...(input.runtimeClass ? { runtimeClass: S.runtimeClass } : {}),
    ...(input.architectures ? { architectures: [S.architecture] } : {}),
    ...(input.priorityClass ? { priorityClassName: S.priorityClass } : {}),
    ...(input.affinity ? { affinity: { [S.affinity]: "x" } as Affinity } : {}),
    ...(input.os ? { os: input.os as NonNullable<DaemonSetOptions["os"]> } : {}),
    requests: { ...S.requests },
    limits: { ...S.limits },
    signer: input.signer,
    signerReplicas: S.signerReplicas,
    service: input.service,
    serviceMonitor: input.serviceMonitor,
    extraArgs: ["--baseline-interval", S.interval],
    nodeBoundTokens: input.nodeBoundTokens,
    ca: PLACEHOLDER_CA,
  };
}

function isResources(value: unknown): boolean {
  const requests = (value as { requests?: Record<string, unknown> } | null)?.requests;
  return typeof requests === "object" && requests?.cpu === S.requests.cpu;
}

/** The daemon's resources are the user's whole: one block, present unless emptied. */
function replaceResources(node: TNode, raw: unknown): TNode {
  if (node === null || typeof node !== "object" || node.kind !== "map") return node;
  const rawMap = raw as Record<string, unknown>;
  return {
    kind: "map",
    entries: node.entries.map((entry): TEntry => {
      if (entry.kind !== "entry") return entry;
      const rawValue = rawMap?.[entry.key];
      if (entry.key === "resources" && isResources(rawValue)) {
        return {
          kind: "cond",
          branches: [{
            test: ".Values.resources",
            body: [{
              kind: "entry",
              key: "resources",
              value: { kind: "block", expr: ".Values.resources" },
            }],
          }],
        };
      }
      if (
        Array.isArray(rawValue) && entry.value && typeof entry.value === "object" &&
        entry.value.kind === "list"
      ) {
        return {
          ...entry,
          value: {
            kind: "list",
            items: entry.value.items.map((item, i) =>
              item.kind === "item"
                ? { ...item, value: replaceResources(item.value, rawValue[i]) }
                : item
            ),
          },
        };
      }
      return { ...entry, value: replaceResources(entry.value, rawValue) };
    }),
  };
}

function docsOf(objects: RenderedObject[]): TDoc[] {
  return objects.map((o) => ({
    id: `${o.manifest.kind}/${o.manifest.metadata.name}`,
    when: [],
    tree: replaceResources(toTemplate(o.manifest, SUBSTITUTIONS), o.manifest),
  }));
}

/** Every combination folded, knob by knob: the chart's object templates. */
function synthesize(knobs: Knob[], input: Partial<RenderInput>): TDoc[] {
  const [knob, ...rest] = knobs;
  if (!knob) return docsOf(renderDaemonSet(renderOptions(input as RenderInput)).objects);
  const sides = knob.cases.map((c) => ({
    test: c.test,
    docs: synthesize(rest, { ...input, ...c.options }),
  }));
  // Cases that render alike are one side (most OS families mount alike); the biggest is the else.
  const groups: { tests: string[]; docs: TDoc[] }[] = [];
  for (const side of sides) {
    const same = groups.find((g) => nodeKey(g.docs) === nodeKey(side.docs));
    if (same) same.tests.push(side.test);
    else groups.push({ tests: [side.test], docs: side.docs });
  }
  if (groups.length === 1) return groups[0]!.docs;
  groups.sort((a, b) => a.tests.length - b.tests.length);
  const otherwise = groups.pop()!;
  return groups.reduceRight(
    (acc, group) => mergeDocs(orTests(group.tests), group.docs, acc),
    otherwise.docs,
  );
}

function orTests(tests: string[]): string {
  return tests.length === 1 ? tests[0]! : `or ${tests.map((t) => `(${t})`).join(" ")}`;
}

// ---- the CA, the baselines' names and the chart-only objects ----

/** Template text before the CA's Secret and ConfigMap: one CA for both, made or kept. */
function caPreamble(): string {
  const secret = daemonSignerSecretName(S.name).replace(S.name, '" .Values.name "');
  return [
    "{{- /* The install's CA: ca.certificate and ca.key when given; else the one the Secret",
    "  already holds (lookup, so an upgrade keeps it); else, with ca.create, a new P-256 CA. */}}",
    `{{- $secretName := print "${secret}" }}`,
    '{{- $caCert := "" }}',
    '{{- $caKey := "" }}',
    "{{- if .Values.ca.certificate }}",
    "{{- $caCert = .Values.ca.certificate }}",
    "{{- $caKey = .Values.ca.key }}",
    "{{- else }}",
    '{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}',
    '{{- if and $existing (hasKey ($existing.data | default dict) "tls.key") }}',
    '{{- $caCert = index $existing.data "tls.crt" | b64dec }}',
    '{{- $caKey = index $existing.data "tls.key" | b64dec }}',
    "{{- else if .Values.ca.create }}",
    '{{- $ca := genCAWithKey "aicr-daemon-ca" 3650 (genPrivateKey "ecdsa") }}',
    "{{- $caCert = $ca.Cert }}",
    "{{- $caKey = $ca.Key }}",
    "{{- else }}",
    '{{- fail (printf "ca.create is false and Secret %s/%s holds no CA: set ca.certificate to the CA\'s PEM certificate (the Secret with tls.crt and tls.key must exist before the daemons start)" .Release.Namespace $secretName) }}',
    "{{- end }}",
    "{{- end }}",
    "{{- if and .Values.ca.key (not .Values.ca.certificate) }}",
    '{{- fail "ca.key is set without ca.certificate: give both, or neither" }}',
    "{{- end }}",
  ].join("\n") + "\n";
}

function setEntry(tree: TNode, key: string, value: TNode): TMap {
  const map = tree as TMap;
  return {
    kind: "map",
    entries: map.entries.map((e) => e.kind === "entry" && e.key === key ? { ...e, value } : e),
  };
}

function entryValue(tree: TNode, key: string): TNode | undefined {
  const map = tree as TMap;
  const found = map.entries.find((e) => e.kind === "entry" && e.key === key);
  return found?.kind === "entry" ? found.value : undefined;
}

/** The CA's Secret (only when the chart holds the key) and ConfigMap, their data from the preamble. */
function withCa(docs: TDoc[]): TDoc[] {
  const secretId = `Secret/${daemonSignerSecretName(S.name)}`;
  const configMapId = `ConfigMap/${daemonCaConfigMapName(S.name)}`;
  return docs.map((doc) => {
    if (doc.id === secretId) {
      let tree = setEntry(doc.tree, "data", {
        kind: "map",
        entries: [
          { kind: "entry", key: "tls.crt", value: expr("$caCert | b64enc") },
          { kind: "entry", key: "tls.key", value: expr("$caKey | b64enc") },
        ],
      });
      const metadata = entryValue(tree, "metadata") as TMap;
      tree = setEntry(tree, "metadata", {
        kind: "map",
        entries: [
          ...metadata.entries,
          {
            kind: "entry",
            key: "annotations",
            // helm uninstall keeps the CA: a re-install signs with the same one (README).
            value: {
              kind: "map",
              entries: [{ kind: "entry", key: "helm.sh/resource-policy", value: "keep" }],
            },
          },
        ],
      });
      // Without the key in the chart (ca.create false), the Secret is the operator's.
      return { ...doc, when: ["$caKey", ...doc.when], tree };
    }
    if (doc.id === configMapId) {
      return {
        ...doc,
        tree: setEntry(doc.tree, "data", {
          kind: "map",
          entries: [{ kind: "entry", key: "ca.crt", value: expr("$caCert") }],
        }),
      };
    }
    return doc;
  });
}

function expr(text: string): TNode {
  return { kind: "expr", parts: [{ expr: text }], type: "string" };
}

/**
 * The daemon's Role lists the baselines that exist (as install does: an upgrade must not take
 * back what `baseline set` granted): their names, read at install and upgrade with `lookup`.
 */
function withBaselineNames(docs: TDoc[]): TDoc[] {
  const placeholder = JSON.stringify(toTemplate(baselinePlaceholderName(S.name), SUBSTITUTIONS));
  const labels = baselineLabels(S.name);
  const checks = Object.entries(labels).map(([k, v]) =>
    v === S.name
      ? `(eq (index $labels ${JSON.stringify(k)} | default "") $.Values.name)`
      : `(eq (index $labels ${JSON.stringify(k)} | default "") ${JSON.stringify(v)})`
  );
  const range = [
    '{{- range $cm := (lookup "v1" "ConfigMap" $.Release.Namespace "").items | default list }}',
    "{{- $labels := $cm.metadata.labels | default dict }}",
    `{{- if and ${checks.join(" ")} }}`,
    "- {{ $cm.metadata.name | quote }}",
    "{{- end }}",
    "{{- end }}",
  ];
  const visit = (node: TNode): TNode => {
    if (node === null || typeof node !== "object") return node;
    if (node.kind === "map") {
      return {
        kind: "map",
        entries: node.entries.map((e) => e.kind === "entry" ? { ...e, value: visit(e.value) } : e),
      };
    }
    if (node.kind === "list") {
      const holds = node.items.some((i) =>
        i.kind === "item" && JSON.stringify(i.value) === placeholder
      );
      return {
        kind: "list",
        items: [
          ...node.items.map((i) => i.kind === "item" ? { ...i, value: visit(i.value) } : i),
          ...(holds ? [{ kind: "raw" as const, lines: range }] : []),
        ],
      };
    }
    return node;
  };
  return docs.map((doc) => doc.id.startsWith("Role/") ? { ...doc, tree: visit(doc.tree) } : doc);
}

// ---- files ----

/** One generated file: its path under `charts/aicr/` and its text. */
export interface ChartFile {
  /** Path under the chart's folder. */
  path: string;
  /** Contents. */
  text: string;
}

const HEADER =
  "# Generated by scripts/chart.ts from the builders of `aicr daemonset render`: do not edit.\n";

function templateFileName(id: string): string {
  const [kind = "", name = ""] = id.split("/");
  // What tells the object from its kind's others: `reader`, `signer`; the sentinels go.
  const words = name.split(/[-.]/).filter((w) =>
    w && ![S.name, S.namespace, "aicr", "daemon", "snapshot"].includes(w)
  );
  const base = kind.replace(/[A-Z]/g, (c, i) => (i === 0 ? c : `-${c}`)).toLowerCase();
  return `${[base, ...words].join("-")}.yaml`;
}

/** The values' defaults, read from the builders' default render. */
function defaults(version: string): Record<string, unknown> {
  const image = releaseImage(version);
  const at = image.lastIndexOf(":");
  const rendered = renderDaemonSet({
    namespace: "default",
    image,
    ca: PLACEHOLDER_CA,
  }).objects.find((o) => o.kind === "DaemonSet")!.manifest as unknown as {
    spec: {
      template: {
        spec: {
          tolerations?: unknown[];
          containers: { resources: unknown }[];
        };
      };
    };
  };
  const pod = rendered.spec.template.spec;
  return {
    name: DEFAULT_DAEMON_NAME,
    image: { repository: image.slice(0, at), tag: image.slice(at + 1) },
    imagePullSecrets: [],
    allNodes: false,
    nodeSelector: {},
    tolerations: pod.tolerations ?? [],
    port: DEFAULT_DAEMON_PORT,
    privileged: true,
    os: "",
    runtimeClassName: "",
    architectures: platformArchitectures(RELEASE_PLATFORMS),
    priorityClassName: "",
    affinity: {},
    resources: pod.containers[0]!.resources,
    baselineInterval: "60s",
    requireNodeBoundToken: true,
    // As render's default (the chart test holds the two defaults equal).
    signer: { enabled: true, replicas: DEFAULT_SIGNER_REPLICAS },
    service: { enabled: true },
    serviceMonitor: { enabled: false },
    ca: { create: true, certificate: "", key: "" },
    prometheusRule: { enabled: false, labels: {} },
    grafanaDashboard: { enabled: false, labels: { grafana_dashboard: "1" } },
  };
}

/** What each value means, written above it in values.yaml. */
const VALUE_DOCS: Record<string, string> = {
  name:
    "The daemon's name: DaemonSet, ServiceAccounts, Service (what `aicr daemonset fetch --name` finds).",
  image:
    "The daemon's image (the chart's own version by default; mirror it for air-gapped clusters).",
  imagePullSecrets: "Secrets for pulling the image: a list of {name: <secret>}.",
  allNodes: "Every node, not only GPU nodes (when nodeSelector is empty).",
  nodeSelector:
    `Nodes the daemon runs on; empty: GPU nodes (${GPU_PRESENT_LABEL}=true) unless allNodes.`,
  tolerations: "Taints the daemon tolerates (every taint by default; [] for none).",
  port: "The port each daemon serves HTTPS on (on the node itself when privileged: host network).",
  privileged:
    "Privileged pods with host namespaces (what a full snapshot needs), or false for PSS restricted.",
  os: `The nodes' OS family for its host mounts: "" (upstream's default), ${
    NODE_OS_FAMILIES.join(", ")
  }.`,
  architectures:
    "The CPU architectures the image has (kubernetes.io/arch): pods land only on those nodes ([]: any).",
  runtimeClassName: 'A RuntimeClass giving nvidia-smi without a GPU request (e.g. "nvidia").',
  priorityClassName:
    "priorityClassName of the daemon's and the signer's pods (\"\": the cluster's default; see the README).",
  affinity:
    "The daemon pods' affinity, given whole: it replaces the architectures' node affinity\n# (include a kubernetes.io/arch requirement when the image lacks an architecture).",
  resources: "The daemon container's requests and limits (given whole).",
  baselineInterval: "How often each daemon re-reads its cohort's baseline.",
  requireNodeBoundToken:
    "Accept only reader tokens bound to the daemon's node (needs Kubernetes 1.31+; false before).",
  service:
    "A headless Service over the daemons, for Prometheus discovery (prometheus.io annotations).",
  serviceMonitor:
    "A prometheus-operator ServiceMonitor instead of the annotations (needs its CRD).",
  ca:
    "The install's CA. create: make one (kept across upgrades and helm uninstall); certificate and\n# key: bring your own (PEM, P-256); create false with certificate: the Secret <name>-signer exists.",
  prometheusRule:
    "The alert rules (files/aicr-rules.yaml) as a prometheus-operator PrometheusRule; labels select it.",
  grafanaDashboard:
    "The dashboard (files/aicr-dashboard.json) in a ConfigMap the Grafana sidecar picks up by label.",
};

function valuesYaml(values: Record<string, unknown>): string {
  const parts = Object.entries(values).map(([key, value]) => {
    const doc = VALUE_DOCS[key];
    return `${doc ? `# ${doc}\n` : ""}${stringify({ [key]: value }, { lineWidth: 0 })}`;
  });
  return HEADER + parts.join("\n");
}

/** values.schema.json: every value's type, so a wrong one fails with the value's path named. */
export function valuesSchema(): Record<string, unknown> {
  const str = { type: "string" };
  const stringMap = { type: "object", additionalProperties: { type: "string" } };
  const quantities = { type: "object", additionalProperties: { type: ["string", "number"] } };
  return {
    $schema: "http://json-schema.org/draft-07/schema#",
    title: "aicr chart values",
    type: "object",
    additionalProperties: false,
    properties: {
      name: { type: "string", pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", maxLength: 63 },
      image: {
        type: "object",
        additionalProperties: false,
        required: ["repository", "tag"],
        properties: {
          repository: { type: "string", pattern: '^[^\\s"]+$' },
          tag: { type: "string", pattern: '^[^\\s"]+$' },
        },
      },
      imagePullSecrets: {
        type: "array",
        items: {
          type: "object",
          required: ["name"],
          additionalProperties: false,
          properties: { name: str },
        },
      },
      allNodes: { type: "boolean" },
      nodeSelector: stringMap,
      tolerations: { type: "array", items: { type: "object" } },
      port: { type: "integer", minimum: 1, maximum: 65535 },
      privileged: { type: "boolean" },
      os: { type: "string", enum: ["", ...NODE_OS_FAMILIES] },
      architectures: { type: "array", items: { type: "string", pattern: "^[a-z0-9]+$" } },
      runtimeClassName: { type: "string", pattern: "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$" },
      priorityClassName: { type: "string", pattern: "^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$" },
      affinity: { type: "object" },
      resources: {
        type: "object",
        additionalProperties: false,
        properties: { requests: quantities, limits: quantities },
      },
      baselineInterval: { type: "string", pattern: "^([0-9]+(ms|s|m|h))+$" },
      requireNodeBoundToken: { type: "boolean" },
      signer: {
        type: "object",
        additionalProperties: false,
        properties: {
          enabled: { type: "boolean" },
          replicas: { type: "integer", minimum: 1, maximum: 10 },
        },
      },
      service: enabledOnly(),
      serviceMonitor: enabledOnly(),
      ca: {
        type: "object",
        additionalProperties: false,
        properties: { create: { type: "boolean" }, certificate: str, key: str },
      },
      prometheusRule: enabledWithLabels(),
      grafanaDashboard: enabledWithLabels(),
    },
  };
}

function enabledOnly() {
  return {
    type: "object",
    additionalProperties: false,
    properties: { enabled: { type: "boolean" } },
  };
}

function enabledWithLabels() {
  return {
    type: "object",
    additionalProperties: false,
    properties: {
      enabled: { type: "boolean" },
      labels: { type: "object", additionalProperties: { type: "string" } },
    },
  };
}

function helpers(): string {
  return `{{/* Generated by scripts/chart.ts: do not edit. */}}
{{- define "aicr.readerName" -}}
{{- if eq .Values.name ${JSON.stringify(DEFAULT_DAEMON_NAME)} -}}
${DEFAULT_DAEMON_READER_NAME}
{{- else -}}
{{ .Values.name }}-reader
{{- end -}}
{{- end -}}
`;
}

/** The PrometheusRule: the shipped rules file, its job the daemon's name (Helm escapes kept). */
function prometheusRuleTemplate(): string {
  const rules = daemonAlertRules({ job: S.name });
  const text = stringify({ spec: rules }, { lineWidth: 0 });
  // Prometheus' own {{ }} stay literal; the job becomes the daemon's name.
  const escaped = text.replace(/\{\{|\}\}/g, (m) => (m === "{{" ? '{{ "{{" }}' : '{{ "}}" }}'))
    .replaceAll(S.name, "{{ .Values.name }}");
  return `${HEADER}{{- if .Values.prometheusRule.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ .Values.name }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: aicr
    app.kubernetes.io/managed-by: aicr
    app.kubernetes.io/component: daemon
    app.kubernetes.io/instance: {{ .Values.name }}
    {{- with .Values.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
${escaped.trimEnd()}
{{- end }}
`;
}

function dashboardTemplate(): string {
  return `${HEADER}{{- if .Values.grafanaDashboard.enabled }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Values.name }}-dashboard
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: aicr
    app.kubernetes.io/managed-by: aicr
    app.kubernetes.io/component: daemon
    app.kubernetes.io/instance: {{ .Values.name }}
    {{- with .Values.grafanaDashboard.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
data:
  ${DASHBOARD_UID}.json: {{ .Files.Get "files/aicr-dashboard.json" | quote }}
{{- end }}
`;
}

function notes(): string {
  return `{{/* Generated by scripts/chart.ts: do not edit. */}}
The aicr daemon {{ .Values.name }} is installed in namespace {{ .Release.Namespace }}.

  kubectl -n {{ .Release.Namespace }} rollout status daemonset/{{ .Values.name }}
  aicr daemonset fetch -n {{ .Release.Namespace }}{{ if ne .Values.name ${
    JSON.stringify(DEFAULT_DAEMON_NAME)
  } }} --name {{ .Values.name }}{{ end }} -o fleet/

helm uninstall keeps Secret {{ .Values.name }}-signer (the CA: a re-install signs with it) and the
cohort baselines; remove them with:
  kubectl -n {{ .Release.Namespace }} delete secret {{ .Values.name }}-signer
  aicr daemonset baseline delete --all -n {{ .Release.Namespace }}
`;
}

function chartYaml(version: string): string {
  return `${HEADER}${
    stringify({
      apiVersion: "v2",
      name: "aicr",
      description:
        "aicr's snapshot daemon: every GPU node's configuration served over HTTPS, per-node identities, drift from cohort baselines as metrics",
      type: "application",
      version: version.replace(/^v/, ""),
      appVersion: version.replace(/^v/, ""),
      kubeVersion: ">=1.27.0-0",
      keywords: ["gpu", "nvidia", "snapshot", "drift", "daemonset"],
      annotations: { "artifacthub.io/license": "Apache-2.0" },
    }, { lineWidth: 0 })
  }`;
}

/** A number sentinel must not be a number the builders write anywhere else. */
function checkNumberSentinels(): void {
  const rendered = renderDaemonSet({
    namespace: "default",
    image: "x",
    signer: true,
    serviceMonitor: true,
    ca: PLACEHOLDER_CA,
  });
  const seen = new Set<number>();
  const walk = (v: unknown): void => {
    if (typeof v === "number") seen.add(v);
    else if (v && typeof v === "object") Object.values(v).forEach(walk);
  };
  rendered.objects.forEach((o) => walk(o.manifest));
  for (const { sentinel } of SUBSTITUTIONS.numbers) {
    if (seen.has(sentinel)) {
      throw new Error(`Cannot use ${sentinel} as a sentinel: the builders write it elsewhere`);
    }
  }
}

/**
 * Every file of the chart.
 *
 * @param version the aicr version (chart and app version, default image tag)
 * @returns the files, paths relative to `charts/aicr/`
 */
export function chartFiles(version: string): ChartFile[] {
  checkNumberSentinels();
  const docs = withBaselineNames(withCa(synthesize(KNOBS, {})));
  const caIds = new Set([
    `Secret/${daemonSignerSecretName(S.name)}`,
    `ConfigMap/${daemonCaConfigMapName(S.name)}`,
  ]);
  const caDocs = docs.filter((d) => caIds.has(d.id));
  const files: ChartFile[] = docs.filter((d) => !caIds.has(d.id)).map((doc) => ({
    path: `templates/${templateFileName(doc.id)}`,
    text: HEADER + emitDoc(doc),
  }));
  files.push({
    path: "templates/ca.yaml",
    text: HEADER + caPreamble() + caDocs.map((d) => `---\n${emitDoc(d)}`).join(""),
  });
  files.push(
    { path: "templates/_helpers.tpl", text: helpers() },
    { path: "templates/NOTES.txt", text: notes() },
    { path: "templates/prometheusrule.yaml", text: prometheusRuleTemplate() },
    { path: "templates/grafana-dashboard.yaml", text: dashboardTemplate() },
    { path: "Chart.yaml", text: chartYaml(version) },
    { path: "values.yaml", text: valuesYaml(defaults(version)) },
    { path: "values.schema.json", text: JSON.stringify(valuesSchema(), null, 2) + "\n" },
    {
      path: "files/aicr-rules.yaml",
      text: HEADER + stringify(daemonAlertRules(), { lineWidth: 0 }),
    },
    {
      path: "files/aicr-dashboard.json",
      text: JSON.stringify(daemonDashboard(), null, 2) + "\n",
    },
  );
  return files.sort((a, b) => a.path.localeCompare(b.path));
}

/** The base64 of the placeholder CA, for tests that look for leftovers. */
export const PLACEHOLDER_CA_B64: string[] = [
  Buffer.from(PLACEHOLDER_CA.caCert).toString("base64"),
  Buffer.from(PLACEHOLDER_CA.caKey).toString("base64"),
];

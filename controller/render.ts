/**
 * DaemonSet mode, controller side: the install rendered, pure. {@link renderDaemonSet} builds
 * the daemon's ServiceAccount and its ClusterRole/Binding (from `daemonRules()`: the agent's
 * read-only baseline, TokenReview/SubjectAccessReview create, CertificateSigningRequest create
 * and get), the reader ServiceAccount with a ClusterRole granting `get snapshots.aicr.run`, the
 * signer Secret (the install's CA key, never mounted), the CA ConfigMap the fleet fetch trusts,
 * the DaemonSet, the in-cluster signer (unless told not to: its ServiceAccount and grants, its
 * Lease and Deployment, labelled component `signer`), and the scrape objects, all with the
 * daemon's labels. `aicr daemonset render` prints it; `install.ts` creates it.
 *
 * The CA is made here, in TypeScript (`x509.ts`): the release binary cannot run `openssl`.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import type { KindName, NewObject } from "../kube/mod.ts";
import {
  buildDaemonSet,
  buildSignerDeployment,
  buildSignerLease,
  DAEMON_CSR_SIGNER,
  daemonCaConfigMapName,
  daemonClusterRoleName,
  daemonLabels,
  daemonNodeAudience,
  daemonReaderClusterRoleName,
  daemonReaderName,
  daemonSelectorLabels,
  daemonSignerSecretName,
  DEFAULT_DAEMON_NAME,
  DEFAULT_DAEMON_PORT,
  signerLabels,
} from "../manifests/mod.ts";
import type { Affinity, Labels, PodOptions } from "../manifests/mod.ts";
import {
  DAEMON_READER_RULES,
  daemonRbacObjects,
  daemonRules,
  signerRbacObjects,
} from "../rbac/mod.ts";
import type { RuleSet } from "../rbac/mod.ts";
import { baselinePlaceholderName } from "../snapshot/mod.ts";
import { generateDaemonCa } from "../x509.ts";
import type { DaemonCa } from "../x509.ts";
import type { RenderCa } from "./render_ca.ts";
import { encodeInstallSettings, INSTALL_SETTINGS_ANNOTATION } from "./install_settings.ts";
import type { InstallSettings } from "./install_settings.ts";

/** The knobs of one daemon install (the same placement and pod flags as `aicr snapshot`). */
export interface DaemonSetOptions extends Omit<PodOptions, "autoTargetGpu"> {
  /** `--namespace`. */
  namespace: string;
  /** The daemon's name (DaemonSet, ServiceAccount, instance label). @default "aicr-daemon" */
  name?: string;
  /** `--port`. @default 8443 */
  port?: number;
  /**
   * `--all-nodes`: no node selector. Without it and without `nodeSelector`, the daemon goes to
   * GPU nodes (`nvidia.com/gpu.present=true`), as the Job's auto-targeting does. @default false
   */
  allNodes?: boolean;
  /** More `aicr daemon` flags. */
  extraArgs?: readonly string[];
  /**
   * A headless Service `<name>` selecting the daemon pods on their https port (the name the
   * serving certificate carries), for Prometheus service discovery. @default true
   */
  service?: boolean;
  /**
   * A prometheus-operator ServiceMonitor for that Service (only where the
   * `monitoring.coreos.com/v1` CRD exists; the install checks by discovery). Without it the
   * Service carries `prometheus.io/*` scrape annotations instead. @default false
   */
  serviceMonitor?: boolean;
  /**
   * The in-cluster signer (`aicr daemonset signer`): its ServiceAccount and grants, its Lease and
   * its Deployment, which approve and sign the daemons' requests with no CLI (else only the
   * CLI's install and fetch sign them). @default true
   */
  signer?: boolean;
  /** The signer's replicas. @default 2 */
  signerReplicas?: number;
  /**
   * `priorityClassName` of the daemon's and the signer's pods. @default none: the cluster's
   * default priority
   */
  priorityClassName?: string;
  /** The daemon pods' affinity, given whole (it replaces the architectures' one). */
  affinity?: Affinity;
  /**
   * The install's settings (the flags' values that shaped these options), recorded on the
   * DaemonSet in the annotation `aicr.run/install-settings` for `aicr daemonset upgrade`.
   * @default none: no annotation
   */
  installSettings?: InstallSettings;
}

/** Options for {@link renderDaemonSet}. */
export interface RenderOptions extends DaemonSetOptions {
  /**
   * The install's CA (from {@link makeDaemonCa}): it signs every daemon's certificate. Without
   * its key (`render --existing-ca`) no Secret is rendered: the CA is kept elsewhere.
   */
  ca: RenderCa;
  /**
   * Whether the API server binds tokens to Nodes (1.31+): the daemons then refuse reader tokens
   * not bound to their node. @default true
   */
  nodeBoundTokens?: boolean;
  /** The installing run's ID (labels). */
  runId?: string;
  /** The installing invocation's ID (labels, with `runId`). */
  invocationId?: string;
  /** Baseline ConfigMaps that already exist (kept from an earlier install): the daemon may read them. */
  baselineConfigMaps?: readonly string[];
}

/** One rendered object, in creation order. */
export interface RenderedObject {
  /** Its kind. */
  kind: KindName;
  /** The manifest. */
  manifest: NewObject & { apiVersion: string; kind: string; metadata: { name: string } };
}

/** What {@link renderDaemonSet} gives. */
export interface RenderedDaemonSet {
  /** Every object, in creation order (ServiceAccounts and grants first, the DaemonSet last). */
  objects: RenderedObject[];
  /** The rule sets the ClusterRoles grant (the gate checks the caller holds them). */
  grants: RuleSet[];
  /** The labels every object carries. */
  labels: Labels;
}

function secretData(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => [k, Buffer.from(v, "utf8").toString("base64")]),
  );
}

/**
 * Makes the CA of one install (P-256, 10 years): its key goes into the signer Secret, which no
 * pod mounts; its certificate into the ConfigMap the fetch trusts.
 *
 * @param options the clock reading
 * @returns the CA pair
 */
export function makeDaemonCa(options: { now: Date }): DaemonCa {
  return generateDaemonCa({ now: options.now });
}

/**
 * Renders every object of one install, pure: names from `manifests/names.ts`, rules from
 * `rbac/rules.ts`, the DaemonSet from `buildDaemonSet`.
 *
 * @param options placement, pod knobs, TLS bundle and run identity
 * @returns the objects in creation order, the granted rule sets and the labels
 * @throws {UsageError} when a value cannot go into a manifest
 */
export function renderDaemonSet(options: RenderOptions): RenderedDaemonSet {
  const { name = DEFAULT_DAEMON_NAME, namespace, ca } = options;
  const identity = options.runId !== undefined && options.invocationId !== undefined
    ? { runId: options.runId, invocationId: options.invocationId }
    : {};
  const labels = daemonLabels({ name, ...identity });
  const rules = daemonRules({
    servingCertificate: true,
    baselineConfigMaps: [baselinePlaceholderName(name), ...(options.baselineConfigMaps ?? [])],
  });
  const readerRules: RuleSet = { namespaced: [], cluster: DAEMON_READER_RULES };
  const daemon = daemonRbacObjects({
    namespace,
    name,
    clusterRoleName: daemonClusterRoleName(namespace, name),
    labels,
    rules,
  });
  const reader = daemonRbacObjects({
    namespace,
    name: daemonReaderName(name),
    clusterRoleName: daemonReaderClusterRoleName(namespace, name),
    labels,
    rules: readerRules,
  });
  const signer = options.signer ?? true
    ? signerRbacObjects({ namespace, name, labels: signerLabels({ name, ...identity }) })
    : undefined;
  const objects: RenderedObject[] = [
    ...rbacObjects(daemon),
    ...rbacObjects(reader),
    ...(signer ? rbacObjects(signer) : []),
    ...caObjects({ namespace, name, labels, ca }),
    { kind: "DaemonSet", manifest: daemonSetManifest(options, identity) },
    ...(signer ? signerWorkload(options, identity) : []),
    ...(options.service ?? true
      ? scrapeObjects({
        namespace,
        name,
        port: options.port ?? DEFAULT_DAEMON_PORT,
        labels,
        serviceMonitor: options.serviceMonitor ?? false,
      })
      : []),
  ];
  return {
    objects,
    grants: [rules, readerRules, ...(signer ? [signer.rules] : [])],
    labels,
  };
}

/** The signer's Lease (created empty) and Deployment, from the daemon's image and pull secrets. */
function signerWorkload(
  options: RenderOptions,
  identity: { runId?: string; invocationId?: string },
): RenderedObject[] {
  const { name = DEFAULT_DAEMON_NAME, namespace } = options;
  const config = {
    namespace,
    name,
    image: options.image,
    ...(options.imagePullSecrets ? { imagePullSecrets: options.imagePullSecrets } : {}),
    ...(options.signerReplicas !== undefined ? { replicas: options.signerReplicas } : {}),
    ...(options.priorityClassName !== undefined
      ? { priorityClassName: options.priorityClassName }
      : {}),
    ...(options.architectures ? { architectures: options.architectures } : {}),
    ...identity,
  };
  return [
    { kind: "Lease", manifest: buildSignerLease(config) as RenderedObject["manifest"] },
    {
      kind: "Deployment",
      manifest: buildSignerDeployment(config) as unknown as RenderedObject["manifest"],
    },
  ];
}

/** One account's RBAC objects in apply order: the account, its cluster grant, then its namespaced one. */
function rbacObjects(rbac: ReturnType<typeof daemonRbacObjects>): RenderedObject[] {
  return [
    { kind: "ServiceAccount", manifest: rbac.serviceAccount },
    { kind: "ClusterRole", manifest: rbac.clusterRole },
    { kind: "ClusterRoleBinding", manifest: rbac.clusterRoleBinding },
    ...(rbac.role && rbac.roleBinding
      ? [
        { kind: "Role" as const, manifest: rbac.role },
        { kind: "RoleBinding" as const, manifest: rbac.roleBinding },
      ]
      : []),
  ];
}

/**
 * The CA's signer Secret (key and certificate, mounted by no pod; only when the key is given)
 * and the ConfigMap the fetch trusts.
 */
function caObjects(
  options: { namespace: string; name: string; labels: Labels; ca: RenderCa },
): RenderedObject[] {
  const { namespace, name, labels, ca } = options;
  const meta = (objectName: string) => ({ name: objectName, namespace, labels: { ...labels } });
  return [
    ...(ca.caKey === undefined ? [] : [{
      kind: "Secret" as const,
      manifest: {
        apiVersion: "v1",
        kind: "Secret",
        metadata: meta(daemonSignerSecretName(name)),
        type: "kubernetes.io/tls",
        data: secretData({ "tls.crt": ca.caCert, "tls.key": ca.caKey }),
      } as RenderedObject["manifest"],
    }]),
    {
      kind: "ConfigMap",
      manifest: {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: meta(daemonCaConfigMapName(name)),
        data: { "ca.crt": ca.caCert },
      } as RenderedObject["manifest"],
    },
  ];
}

/** The DaemonSet itself: the pod knobs of `options`, the CSR-signed TLS, per-node token audience. */
function daemonSetManifest(
  options: RenderOptions,
  identity: { runId?: string; invocationId?: string },
): RenderedObject["manifest"] {
  const {
    name = DEFAULT_DAEMON_NAME,
    namespace,
    allNodes = false,
    extraArgs,
    baselineConfigMaps: _baselines,
    signer: _signer,
    signerReplicas: _signerReplicas,
    port = DEFAULT_DAEMON_PORT,
    service: _service,
    serviceMonitor: _serviceMonitor,
    ca: _ca,
    nodeBoundTokens = true,
    installSettings,
    ...pod
  } = options;
  const daemonSet = buildDaemonSet({
    ...pod,
    namespace,
    name,
    port,
    tls: { csrSigner: DAEMON_CSR_SIGNER, nodeBoundTokens },
    // One audience per node: the daemon on node A accepts only tokens minted for node A.
    tokenAudience: daemonNodeAudience("$(NODE_NAME)"),
    autoTargetGpu: !allNodes && Object.keys(options.nodeSelector ?? {}).length === 0,
    ...(allNodes ? { nodeSelector: {} } : {}),
    // Each daemon reads its cohort's baseline from this namespace (aicr daemonset baseline set).
    extraArgs: ["--baseline-namespace", namespace, "--baseline-name", name, ...(extraArgs ?? [])],
    ...identity,
  });
  if (installSettings) {
    daemonSet.metadata.annotations = {
      ...daemonSet.metadata.annotations,
      [INSTALL_SETTINGS_ANNOTATION]: encodeInstallSettings(installSettings),
    };
  }
  return daemonSet as unknown as RenderedObject["manifest"];
}

/** The container port's name, which the Service and the ServiceMonitor refer to. */
const DAEMON_PORT_NAME = "https";

/**
 * The headless Service over the daemon pods and, when asked, its ServiceMonitor; without one the
 * Service carries the `prometheus.io/*` annotations that annotation-driven scrape jobs read.
 */
function scrapeObjects(
  options: {
    namespace: string;
    name: string;
    port: number;
    labels: Labels;
    serviceMonitor: boolean;
  },
): RenderedObject[] {
  const { namespace, name, port, labels, serviceMonitor } = options;
  const annotations = serviceMonitor ? {} : {
    annotations: {
      "prometheus.io/scrape": "true",
      "prometheus.io/scheme": "https",
      "prometheus.io/port": String(port),
      "prometheus.io/path": "/metrics",
    },
  };
  const service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace, labels: { ...labels }, ...annotations },
    spec: {
      clusterIP: "None",
      selector: daemonSelectorLabels(name),
      ports: [{ name: DAEMON_PORT_NAME, port, targetPort: port, protocol: "TCP" }],
    },
  };
  const objects: RenderedObject[] = [
    { kind: "Service", manifest: service as unknown as RenderedObject["manifest"] },
  ];
  if (serviceMonitor) {
    const monitor = {
      apiVersion: "monitoring.coreos.com/v1",
      kind: "ServiceMonitor",
      metadata: { name, namespace, labels: { ...labels } },
      spec: {
        selector: { matchLabels: daemonSelectorLabels(name) },
        namespaceSelector: { matchNames: [namespace] },
        endpoints: [{
          port: DAEMON_PORT_NAME,
          scheme: "https",
          path: "/metrics",
          // Prometheus's own ServiceAccount token (API server audience): the daemon reviews it
          // and asks 'get nodes/metrics', as the kubelet does.
          bearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
          // Each daemon's own certificate names its node and its pod IP: Prometheus scrapes the
          // pod IP and verifies it against the install's CA (no fixed server name).
          tlsConfig: { ca: { configMap: { name: daemonCaConfigMapName(name), key: "ca.crt" } } },
          relabelings: [{ sourceLabels: ["__meta_kubernetes_pod_node_name"], targetLabel: "node" }],
        }],
      },
    };
    objects.push({
      kind: "ServiceMonitor",
      manifest: monitor as unknown as RenderedObject["manifest"],
    });
  }
  return objects;
}

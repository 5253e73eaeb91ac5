/**
 * `aicr snapshot --add-roles-to-service-account <sa>`: the four manifests that grant
 * the agent's rules to a ServiceAccount the user provisioned (IRSA, Workload
 * Identity), each opening with a comment header that explains every rule, plus the
 * next-steps text the CLI prints. Rendering is pure; {@link writeRbacDirectory} writes
 * the files through an injected file system, refusing a directory that exists.
 *
 * @module
 */
import { join } from "node:path";
import { ConflictError, ToolError } from "../errors.ts";
import { formatManifest, rbacDirectoryName } from "../manifests/mod.ts";
import { renderedConfigMaps, renderedRbacObjects } from "./objects.ts";
import {
  agentRules,
  isMutating,
  qualifiedResource,
  READ_ONLY_VERBS,
  splitResource,
} from "./rules.ts";
import type { Rule } from "./rules.ts";

/** One rendered file. */
export interface RenderedFile {
  /** File name inside the directory, e.g. `01-role.yaml`. */
  name: string;
  /** The file's text: comment header, then the manifest. */
  text: string;
}

/** Options for {@link renderRbacFiles}. */
export interface RenderRbacOptions {
  /** `--namespace`. */
  namespace: string;
  /** `--add-roles-to-service-account`. */
  serviceAccount: string;
  /** The run ID that names the directory. */
  runId: string;
  /** `--discover-network`: include the mutating discovery rules. @default false */
  discoverNetwork?: boolean;
  /** The `cm://` output's name, when runs as this ServiceAccount write one. */
  outputConfigMap?: string;
  /** The aicr version written in the headers. */
  version: string;
}

/** The rendered set. */
export interface RenderedRbac {
  /** The directory name, `snapshot-rbac-<runID>` (relative to the working directory). */
  directory: string;
  /** The four files, in apply order. */
  files: RenderedFile[];
}

const WIDTH = 92;

function wrap(text: string, indent: string): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && indent.length + line.length + 1 + word.length > WIDTH) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(indent + line);
  return lines;
}

function comment(lines: readonly string[]): string {
  return lines.map((line) => (line === "" ? "#" : `# ${line}`)).join("\n") + "\n\n";
}

function resourcesOf(rule: Rule): string {
  return rule.resources.map((r) => qualifiedResource({ group: rule.group, ...splitResource(r) }))
    .join(", ");
}

function explainRules(rules: readonly Rule[]): string[] {
  const lines: string[] = [];
  for (const rule of rules) {
    const names = rule.resourceNames ? ` (only ${rule.resourceNames.join(", ")})` : "";
    lines.push("", ...wrap(`${resourcesOf(rule)}${names}: ${rule.verbs.join(", ")}`, "  "));
    lines.push(...wrap(`${rule.why}.`, "    "));
  }
  return lines;
}

function generatedBy(options: RenderRbacOptions, directory: string): string[] {
  const flags =
    `--namespace ${options.namespace} --add-roles-to-service-account ${options.serviceAccount}${
      options.outputConfigMap ? ` -o cm://${options.namespace}/${options.outputConfigMap}` : ""
    }${options.discoverNetwork ? " --discover-network" : ""}`;
  return [
    `Written by aicr ${options.version}, which applied nothing:`,
    `  aicr snapshot ${flags}`,
    "Apply it, once you are satisfied:",
    `  kubectl apply -f ${directory}/`,
    "Revoke it (no aicr run ever deletes it):",
    `  kubectl delete -f ${directory}/`,
  ];
}

function verifyServiceAccount(namespace: string, serviceAccount: string): string[] {
  return [
    ...wrap(
      "aicr did not check that this ServiceAccount exists (it contacted no cluster), and Kubernetes accepts a binding to a subject that does not exist: such a binding simply grants nothing. Verify the name before applying:",
      "",
    ),
    "",
    `  kubectl get serviceaccount ${serviceAccount} -n ${namespace}`,
    "",
    "aicr never creates this ServiceAccount for you.",
  ];
}

function mutatingWarning(
  rules: readonly Rule[],
  namespace: string,
  serviceAccount: string,
): string[] {
  const mutating = rules.filter(isMutating);
  if (mutating.length === 0) return [];
  const lines = [
    "WARNING: rendered with --discover-network, so this ClusterRole is NOT read-only.",
    ...wrap(
      `Once applied, these cluster-scoped mutating rules stay on ServiceAccount "${serviceAccount}" in namespace "${namespace}" until you delete them; a run-owned ServiceAccount would hold them for one run only. Each exists for one step of k8s-launch-kit's live network discovery:`,
      "",
    ),
  ];
  for (const rule of mutating) {
    const verbs = rule.verbs.filter((verb) => !READ_ONLY_VERBS.includes(verb));
    lines.push("", ...wrap(`- ${verbs.join(", ")} ${resourcesOf(rule)}`, "  "));
    lines.push(...wrap(`${rule.why}.`, "    "));
  }
  lines.push(
    "",
    ...wrap(
      "Generate without --discover-network unless you need live network discovery; that grant is read-only.",
      "",
    ),
    "",
  );
  return lines;
}

/**
 * Renders the four files of an exact-ServiceAccount grant:
 * `01-role.yaml`, `02-rolebinding.yaml`, `03-clusterrole.yaml`,
 * `04-clusterrolebinding.yaml`, numbered so `kubectl apply -f <dir>/` creates each
 * role before the binding that names it.
 *
 * @param options namespace, ServiceAccount, run ID, discovery, version
 * @returns the directory name and the files
 * @throws {UsageError} when the namespace or ServiceAccount is not a valid name
 */
export function renderRbacFiles(options: RenderRbacOptions): RenderedRbac {
  const { namespace, serviceAccount, discoverNetwork = false } = options;
  const configMaps = renderedConfigMaps(serviceAccount, options.outputConfigMap);
  const directory = rbacDirectoryName(options.runId);
  const grant: GrantText = {
    namespace,
    serviceAccount,
    sa: `ServiceAccount "${serviceAccount}" in namespace "${namespace}"`,
    objects: renderedRbacObjects({ namespace, serviceAccount, discoverNetwork, configMaps }),
    rules: agentRules({ discoverNetwork, configMaps }),
    configMaps,
    footer: generatedBy(options, directory),
  };
  return { directory, files: [...namespacedFiles(grant), ...clusterFiles(grant)] };
}

/** What the four files of a grant are written from. */
interface GrantText {
  namespace: string;
  serviceAccount: string;
  /** The ServiceAccount as the comments name it. */
  sa: string;
  objects: ReturnType<typeof renderedRbacObjects>;
  rules: ReturnType<typeof agentRules>;
  configMaps: ReturnType<typeof renderedConfigMaps>;
  /** The closing lines of every file: how it was generated and how to apply it. */
  footer: string[];
}

/** `01-role.yaml` and `02-rolebinding.yaml`: what the agent may do in the namespace. */
function namespacedFiles(grant: GrantText): RenderedFile[] {
  const { namespace, serviceAccount, sa, configMaps, footer } = grant;
  const role = grant.objects.role.metadata.name;
  return [
    {
      name: "01-role.yaml",
      text: comment([
        `Role ${role} (namespace "${namespace}")`,
        "",
        ...wrap(
          `What the aicr snapshot agent, running as ${sa}, may do inside that namespace. Bound by 02-rolebinding.yaml. The rules, and why the agent needs each:`,
          "",
        ),
        "",
        ...wrap(
          `Least privilege: the agent may write only the ConfigMaps named below, never the namespace's others (kube-root-ca.crt and your own included). Runs as this ServiceAccount stage their snapshot in "${configMaps.staging}", which aicr creates before each run and deletes after it${
            configMaps.target === undefined
              ? "; to have them write a cm:// output too, render again with that -o cm://<namespace>/<name>"
              : ""
          }.`,
          "",
        ),
        ...explainRules(grant.rules.namespaced),
        "",
        ...footer,
      ]) + formatManifest(grant.objects.role),
    },
    {
      name: "02-rolebinding.yaml",
      text: comment([
        `RoleBinding ${role} (namespace "${namespace}")`,
        "",
        ...wrap(`Binds Role ${role} (01-role.yaml) to ${sa}.`, ""),
        "",
        ...verifyServiceAccount(namespace, serviceAccount),
        "",
        ...footer,
      ]) + formatManifest(grant.objects.roleBinding),
    },
  ];
}

/** `03-clusterrole.yaml` and `04-clusterrolebinding.yaml`: what the agent may do cluster-wide. */
function clusterFiles(grant: GrantText): RenderedFile[] {
  const { namespace, serviceAccount, sa, footer } = grant;
  const clusterRole = grant.objects.clusterRole.metadata.name;
  return [
    {
      name: "03-clusterrole.yaml",
      text: comment([
        `ClusterRole ${clusterRole} (cluster-scoped)`,
        "",
        ...mutatingWarning(grant.rules.cluster, namespace, serviceAccount),
        ...wrap(
          `What the aicr snapshot agent, running as ${sa}, may do across the cluster. Bound by 04-clusterrolebinding.yaml. The rules, and why the agent needs each:`,
          "",
        ),
        ...explainRules(grant.rules.cluster),
        "",
        ...footer,
      ]) + formatManifest(grant.objects.clusterRole),
    },
    {
      name: "04-clusterrolebinding.yaml",
      text: comment([
        `ClusterRoleBinding ${clusterRole} (cluster-scoped)`,
        "",
        ...wrap(`Binds ClusterRole ${clusterRole} (03-clusterrole.yaml) to ${sa}.`, ""),
        "",
        ...wrap(
          "The name joins namespace and ServiceAccount on '.', which a namespace can never hold, so applying this grant cannot retarget another namespace's.",
          "",
        ),
        "",
        ...verifyServiceAccount(namespace, serviceAccount),
        "",
        ...footer,
      ]) + formatManifest(grant.objects.clusterRoleBinding),
    },
  ];
}

/** Options for {@link rbacNextSteps}. */
export interface NextStepsOptions {
  /** The directory as the user should type it, e.g. `snapshot-rbac-<runID>`. */
  directory: string;
  /** `--namespace`. */
  namespace: string;
  /** `--add-roles-to-service-account`. */
  serviceAccount: string;
  /** `--discover-network`. @default false */
  discoverNetwork?: boolean;
}

/**
 * The text the CLI prints after writing the directory: where it went and the
 * review, apply, snapshot and revoke commands.
 *
 * @param options directory, namespace, ServiceAccount, discovery
 * @returns the text, ending in a newline
 */
export function rbacNextSteps(options: NextStepsOptions): string {
  const { directory, namespace, serviceAccount, discoverNetwork = false } = options;
  return [
    `wrote the RBAC for ServiceAccount "${serviceAccount}" in namespace "${namespace}" to ${directory}/ (nothing was applied)`,
    "",
    "next steps:",
    "  1. read what you are about to grant (each file explains its rules):",
    `       less ${directory}/*.yaml`,
    "  2. grant it:",
    `       kubectl apply -f ${directory}/`,
    "  3. take snapshots as that ServiceAccount:",
    `       aicr snapshot --namespace ${namespace} --service-account-name ${serviceAccount}${
      discoverNetwork ? " --discover-network" : ""
    }`,
    "  4. revoke the grant when the ServiceAccount no longer needs it:",
    `       kubectl delete -f ${directory}/`,
    "",
  ].join("\n");
}

/** The slice of `node:fs/promises` {@link writeRbacDirectory} uses. */
export interface RbacDirectoryFs {
  /** Creates one directory; rejects with code `EEXIST` when it exists. */
  mkdir(path: string, options: { mode: number }): Promise<unknown>;
  /** Writes a file; with flag `wx` rejects when it exists. */
  writeFile(path: string, data: string, options: { mode: number; flag: string }): Promise<void>;
  /** Renames a file atomically. */
  rename(oldPath: string, newPath: string): Promise<void>;
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Writes the files into a new directory: the directory is created exclusively (never
 * recursive, so an existing one fails with CONFLICT and a set under review is never
 * overwritten), and each file is written to a temporary name and renamed into place.
 *
 * @param dir the directory path
 * @param files the files
 * @param fs `node:fs/promises` or a fake
 * @throws {ConflictError} when the directory already exists
 * @throws {ToolError} when a write fails
 */
export async function writeRbacDirectory(
  dir: string,
  files: readonly RenderedFile[],
  fs: RbacDirectoryFs,
): Promise<void> {
  try {
    await fs.mkdir(dir, { mode: 0o755 });
  } catch (error) {
    if (errorCode(error) === "EEXIST") {
      throw new ConflictError(
        `Cannot write RBAC manifests to '${dir}' as the directory already exists: generate again for a fresh run ID, or remove it`,
        { cause: error },
      );
    }
    throw new ToolError(
      `Cannot write RBAC manifests to '${dir}': ${
        error instanceof Error ? error.message : String(error)
      }`,
      "internal",
      500,
      { cause: error },
    );
  }
  for (const file of files) {
    const target = join(dir, file.name);
    const temporary = join(dir, `.${file.name}.tmp`);
    try {
      await fs.writeFile(temporary, file.text, { mode: 0o644, flag: "wx" });
      await fs.rename(temporary, target);
    } catch (error) {
      throw new ToolError(
        `Cannot write RBAC manifest '${target}': ${
          error instanceof Error ? error.message : String(error)
        }`,
        "internal",
        500,
        { cause: error },
      );
    }
  }
}

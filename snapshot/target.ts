/**
 * Where a snapshot goes or comes from: stdout (`-` or empty), a file path, or a
 * ConfigMap `cm://namespace/name`.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { formatTimestamp } from "./model.ts";
import type { SnapshotFormat } from "./codec.ts";

/** The URI scheme of ConfigMap targets. */
const CONFIGMAP_SCHEME = "cm://";

/** A ConfigMap address. */
export interface ConfigMapRef {
  /** Namespace. */
  namespace: string;
  /** Name. */
  name: string;
}

/** A parsed output target (the `output` option). */
export type SnapshotTarget =
  | { kind: "stdout" }
  | { kind: "file"; path: string }
  | { kind: "configmap"; ref: ConfigMapRef };

const DNS_LABEL_REGEXP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN_REGEXP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Parses `cm://namespace/name`, validating both parts as Kubernetes names.
 *
 * @param uri the URI
 * @param option the option it came from, for the message @default "output"
 * @returns the ConfigMap address
 * @throws {UsageError} naming the value and the expected form
 */
export function parseConfigMapUri(uri: string, option = "output"): ConfigMapRef {
  if (!uri.startsWith(CONFIGMAP_SCHEME)) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${flag(option)}' value '${uri}' as a ConfigMap: it must start with 'cm://'`,
    );
  }
  const rest = uri.slice(CONFIGMAP_SCHEME.length);
  const slash = rest.indexOf("/");
  const namespace = slash < 0 ? "" : rest.slice(0, slash).trim();
  const name = slash < 0 ? "" : rest.slice(slash + 1).trim();
  if (!namespace || !name) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${
          flag(option)
        }' value '${uri}': a ConfigMap URI is 'cm://<namespace>/<name>' with both parts non-empty`,
    );
  }
  if (namespace.length > 63 || !DNS_LABEL_REGEXP.test(namespace)) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${
          flag(option)
        }' value '${uri}': namespace '${namespace}' is not a valid Kubernetes namespace (lower-case letters, digits and '-', at most 63 characters)`,
    );
  }
  if (name.length > 253 || !DNS_SUBDOMAIN_REGEXP.test(name)) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${
          flag(option)
        }' value '${uri}': name '${name}' is not a valid ConfigMap name (lower-case letters, digits, '-' and '.', at most 253 characters)`,
    );
  }
  return { namespace, name };
}

/**
 * Parses an output target.
 *
 * @param value the value (`-`, empty, a path or `cm://ns/name`)
 * @param option the option it came from, for messages @default "output"
 * @returns the target
 * @throws {UsageError} for a malformed `cm://` URI or another URL scheme
 */
export function parseSnapshotTarget(value: string | undefined, option = "output"): SnapshotTarget {
  if (value === undefined || value === "" || value === "-") return { kind: "stdout" };
  if (value.startsWith(CONFIGMAP_SCHEME)) {
    return { kind: "configmap", ref: parseConfigMapUri(value, option) };
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${
          flag(option)
        }' value '${value}': only a file path, '-' (stdout) or 'cm://<namespace>/<name>' are supported`,
    );
  }
  if (value.endsWith("/")) {
    throw new UsageError(
      (flag) =>
        `Cannot use '${flag(option)}' value '${value}': it names a directory; give a file path`,
    );
  }
  return { kind: "file", path: value };
}

/**
 * Formats a ConfigMap address as its URI.
 *
 * @param ref the address
 * @returns `cm://namespace/name`
 */
export function formatConfigMapUri(ref: ConfigMapRef): string {
  return `${CONFIGMAP_SCHEME}${ref.namespace}/${ref.name}`;
}

/** The ConfigMap data key holding a snapshot in a format. */
function snapshotDataKey(format: SnapshotFormat): string {
  return `snapshot.${format}`;
}

/**
 * Builds the ConfigMap content for a snapshot: `snapshot.<format>`, `format`, `timestamp`.
 *
 * @param encoded the encoded snapshot
 * @param format its format
 * @param writtenAt write time
 * @returns the data map
 */
export function snapshotConfigMapData(
  encoded: string,
  format: SnapshotFormat,
  writtenAt: Date,
): Record<string, string> {
  return {
    [snapshotDataKey(format)]: encoded,
    format,
    timestamp: formatTimestamp(writtenAt),
  };
}

/**
 * Picks the snapshot text out of a ConfigMap's data: `data.format` (default yaml), then
 * `snapshot.<format>`, then `snapshot.yaml` or `snapshot.json`.
 *
 * @param data the ConfigMap data
 * @returns the text, or undefined when there is none
 */
export function snapshotFromConfigMapData(
  data: Record<string, string> | undefined,
): string | undefined {
  if (!data) return undefined;
  const format = data.format ?? "yaml";
  return data[`snapshot.${format}`] ?? data["snapshot.yaml"] ?? data["snapshot.json"];
}

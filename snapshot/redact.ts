/**
 * `--redact`: a snapshot with its hostnames, node names, IP addresses and registry hosts
 * replaced by stable keyed tokens, before it leaves for a vendor. A token is
 * `redacted-` and the first 12 hex digits of HMAC-SHA256(key, value): the same value under the
 * same key gives the same token in every snapshot, so `aicr diff` and fleet cohorts still work
 * across redacted snapshots, and without the key a token cannot be turned back into a name by
 * hashing guesses (an IPv4 space is small enough to hash in full; a keyed hash is not).
 *
 * Pure: the caller reads the key (flag, environment or file) and hands it in.
 *
 * @module
 */
import { createHmac } from "node:crypto";
import { isIP } from "node:net";
import type { Measurement, Snapshot, Subtype } from "./model.ts";

/** What `--redact` replaces, as listed in the snapshot's `redacted` metadata. */
export const REDACTED_CATEGORIES = ["hostnames", "node-names", "ip-addresses", "registry-hosts"];

/** The metadata key that lists what was redacted. */
export const REDACTED_METADATA = "redacted";
/** The metadata key naming the key's id (a keyed hash of a fixed text), to tell keys apart. */
export const REDACTION_KEY_METADATA = "redaction-key-id";

/** Keys whose reading is a host or node name. */
const NAME_KEY_REGEXP = /(^|[.-])(source-node|node-name|nodename|hostname|host-name|node|host)$/i;
/** An IPv4 address inside text. */
const IPV4_REGEXP = /(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.]*\d)/g;
/** A run of hex digits and colons that may be an IPv6 address. */
const IPV6_REGEXP = /(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])/g;
/** An image reference (`host[:port]/path:tag` or `@sha256:`): its registry host is group 1. */
const IMAGE_REGEXP =
  /(?<![\w./-])((?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?::\d+)?|localhost(?::\d+)?|[A-Za-z0-9-]+:\d+)(\/[a-z0-9][\w./-]*(?::\w[\w.-]{0,127}|@sha256:[0-9a-f]{64}))/g;
/** Keys whose reading is a repository or registry (`nvcr.io/nvidia`), tag or not. */
const REPOSITORY_KEY_REGEXP = /(repository|registry|image|repo)$/i;
/** A registry host leading a repository: a dotted name, localhost or a port, then `/` or the end. */
const REPOSITORY_HOST_REGEXP =
  /^((?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?::\d+)?|localhost(?::\d+)?|[A-Za-z0-9-]+:\d+)(?=\/|$)/;

/** What a host or node name looks like (not `true`, a number or a sentence). */
const NAME_REGEXP =
  /^(?!(true|false|none|null|unknown|n\/a)$)(?=.*[A-Za-z])[A-Za-z0-9][A-Za-z0-9.-]*$/i;
/** A `GET node/<name>` style source. */
const NODE_SOURCE_REGEXP = /\bnodes?\/([A-Za-z0-9.-]+)/g;

/** A redactor: one key, its tokens kept for the snapshot's names. */
export interface Redactor {
  /** The token for one value under this key. */
  token(value: string): string;
  /** The key's id, safe to publish. */
  keyId: string;
}

/**
 * Makes a redactor for a key.
 *
 * @param key the secret key (at least 16 bytes)
 * @returns the redactor
 * @throws {RangeError} when the key is shorter than 16 bytes
 */
export function createRedactor(key: string | Uint8Array): Redactor {
  const bytes = typeof key === "string" ? new TextEncoder().encode(key) : key;
  if (bytes.length < 16) {
    throw new RangeError(
      `Cannot redact with the key given as it is too short: current length is ${bytes.length} bytes, at least 16 needed`,
    );
  }
  const hmac = (value: string) => createHmac("sha256", bytes).update(value).digest("hex");
  return {
    token: (value) => `redacted-${hmac(value).slice(0, 12)}`,
    keyId: hmac("aicr redaction key id").slice(0, 16),
  };
}

/**
 * Redacts a snapshot: every node and host name it names (its own, the topology's, the K8s
 * node's), every IPv4 and IPv6 address and every image reference's registry host, in metadata,
 * subtype names, reading keys, values and contexts, each replaced by its token; the metadata
 * lists what was redacted and the key's id.
 *
 * @param snapshot the snapshot (not changed)
 * @param redactor from {@link createRedactor}
 * @returns a new, redacted snapshot
 * @example Redacting a snapshot
 * ```ts ignore
 * const safe = redactSnapshot(snapshot, createRedactor(key));
 * ```
 */
export function redactSnapshot(snapshot: Snapshot, redactor: Redactor): Snapshot {
  if (snapshot.metadata[REDACTED_METADATA]) return snapshot;
  const names = [...collectNames(snapshot)].filter((n) => n.length >= 2)
    .sort((a, b) => b.length - a.length);
  const text = (value: string) => redactText(value, names, redactor);
  const nameSet = new Set(names);
  const keyText = (key: string) =>
    nameSet.has(key) ? redactor.token(key) : redactText(key, [], redactor);
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(snapshot.metadata)) metadata[key] = text(value);
  metadata[REDACTED_METADATA] = REDACTED_CATEGORIES.join(",");
  metadata[REDACTION_KEY_METADATA] = redactor.keyId;
  return {
    ...snapshot,
    metadata: metadata as Snapshot["metadata"],
    measurements: snapshot.measurements.map((m): Measurement => ({
      ...m,
      subtypes: m.subtypes.map((s) => redactSubtype(s, { text, keyText, token: redactor.token })),
    })),
  };
}

function redactSubtype(subtype: Subtype, redact: SubtypeRedaction): Subtype {
  const { text, keyText, token } = redact;
  const data: Subtype["data"] = {};
  for (const [rawKey, value] of Object.entries(subtype.data)) {
    // A key is a path or a label (`/proc/sys/vm/...`): a short host name inside one is
    // a coincidence, so keys lose addresses and registries, and names only when whole.
    const key = keyText(rawKey);
    if (typeof value !== "string") {
      data[key] = value;
      continue;
    }
    const host = REPOSITORY_KEY_REGEXP.test(rawKey)
      ? REPOSITORY_HOST_REGEXP.exec(value)?.[1]
      : undefined;
    data[key] = host === undefined ? text(value) : text(token(host) + value.slice(host.length));
  }
  const out: Subtype = { ...subtype, subtype: text(subtype.subtype), data };
  if (subtype.context) {
    out.context = Object.fromEntries(
      Object.entries(subtype.context).map(([k, v]) => [k, text(v)]),
    );
  }
  return out;
}

/** How one snapshot's texts are redacted: values, reading keys, and one value's token. */
interface SubtypeRedaction {
  text: (value: string) => string;
  keyText: (key: string) => string;
  token: (value: string) => string;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The node and host names a snapshot carries, wherever they are said to be one. */
function collectNames(snapshot: Snapshot): Set<string> {
  const names = new Set<string>();
  const add = (value: string | undefined) => {
    const name = value?.trim();
    if (name && NAME_REGEXP.test(name)) names.add(name);
  };
  add(snapshot.metadata["source-node"]);
  for (const m of snapshot.measurements) {
    for (const s of m.subtypes) {
      for (const [key, value] of Object.entries(s.data)) {
        if (typeof value !== "string") continue;
        if (NAME_KEY_REGEXP.test(key)) add(value);
        // NodeTopology's `value|node,node` (labels) and `effect|value|node,node` (taints).
        if (m.type === "NodeTopology" && value.includes("|")) {
          for (const node of (value.slice(value.lastIndexOf("|") + 1)).split(",")) add(node);
        }
      }
      for (const value of Object.values(s.context ?? {})) {
        for (const match of value.matchAll(NODE_SOURCE_REGEXP)) add(match[1]);
      }
    }
  }
  return names;
}

/**
 * Redacts one text: the names first (longest first, so a name inside another goes with it),
 * then addresses, then registry hosts.
 *
 * @param value the text
 * @param names the snapshot's node and host names, longest first
 * @param redactor the key's tokens
 * @returns the text with each sensitive part replaced by its token
 */
export function redactText(value: string, names: readonly string[], redactor: Redactor): string {
  let out = value;
  for (const name of names) {
    if (!out.includes(name)) continue;
    // Whole names only: `node-1` in `node-1.example.com` or `GET node/node-1`, not in `node-12`.
    out = out.replace(
      new RegExp(`(?<![A-Za-z0-9_-])${escapeRegExp(name)}(?![A-Za-z0-9_-])`, "g"),
      redactor.token(name),
    );
  }
  out = out.replace(IPV4_REGEXP, (ip) => isIP(ip) === 4 ? redactor.token(ip) : ip);
  if (out.includes(":")) {
    out = out.replace(IPV6_REGEXP, (ip) => isIP(ip) === 6 ? redactor.token(ip) : ip);
  }
  if (out.includes("/")) {
    out = out.replace(IMAGE_REGEXP, (_, host: string, rest: string) => redactor.token(host) + rest);
  }
  return out;
}

/**
 * Redacts a rendered report (a fleet diff's table, YAML, JSON or HTML): the node names it
 * compares, every address and every image's registry host, as {@link redactSnapshot} would
 * have replaced them in the snapshots (the same tokens under the same key).
 *
 * @param text the report
 * @param names the node names the report names
 * @param redactor the key's tokens
 * @returns the report with each name, address and registry host replaced by its token
 */
export function redactReport(text: string, names: readonly string[], redactor: Redactor): string {
  const sorted = names.filter((n) => n.length >= 2 && NAME_REGEXP.test(n))
    .sort((a, b) => b.length - a.length);
  return redactText(text, sorted, redactor);
}

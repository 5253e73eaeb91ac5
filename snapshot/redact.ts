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
/**
 * An IPv4 address inside text, after a dot too (a label key's `node-ip.10.0.0.1`), never four
 * numbers of a longer dotted run (`1.2.3.4.5`).
 */
const IPV4_REGEXP = /(?<!\d)(?<!\d\.)(?:\d{1,3}\.){3}\d{1,3}(?![\d.]*\d)/g;
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
/** A token, as {@link createRedactor} makes them. */
const TOKEN_REGEXP = /^redacted-[0-9a-f]{12}$/;
/** A `GET node/<name>` style source. */
const NODE_SOURCE_REGEXP = /\bnodes?\/([A-Za-z0-9.-]+)/g;

/**
 * A redactor: one key, and the node and host names it has learnt. A run keeps one: every
 * snapshot it redacts teaches it that snapshot's names, so a later text (another snapshot, a
 * report, a log line) hides them too, with the same tokens.
 */
export interface Redactor {
  /** The token for one value under this key. */
  token(value: string): string;
  /** The key's id, safe to publish. */
  keyId: string;
  /**
   * Takes node or host names (a value that does not look like one, such as `true`, a number or
   * a sentence, is left out), so that {@link Redactor.text} replaces them from now on.
   */
  learn(names: Iterable<string>): void;
  /** A text with every learnt name, every IP address and every image's registry host replaced. */
  text(value: string): string;
}

/**
 * Makes a redactor for a key.
 *
 * @param key the secret key (at least 16 bytes)
 * @returns the redactor, with no name learnt yet
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
  // A fleet repeats its names in every snapshot: one HMAC per distinct value.
  const tokens = new Map<string, string>();
  const token = (value: string) => {
    let found = tokens.get(value);
    if (found === undefined) tokens.set(value, found = `redacted-${hmac(value).slice(0, 12)}`);
    return found;
  };
  const names = new Set<string>();
  // The same texts come back in every snapshot of a fleet: each pattern pass is done once.
  const passes = new Map<string, string>();
  const patterns = (value: string) => {
    let out = passes.get(value);
    if (out === undefined) {
      if (passes.size >= PATTERN_CACHE_SIZE) passes.clear();
      passes.set(value, out = redactPatterns(value, token));
    }
    return out;
  };
  return {
    token,
    keyId: hmac("aicr redaction key id").slice(0, 16),
    learn(given) {
      for (const value of given) {
        const name = value.trim();
        // A token is never a name: text redacted twice stays as it was.
        if (name.length >= 2 && NAME_REGEXP.test(name) && !TOKEN_REGEXP.test(name)) names.add(name);
      }
    },
    // The names first (longest first), then addresses, then registry hosts.
    text: (value) => patterns(replaceNames(value, names, token)),
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
  // Its own names, and every name the run learnt before (another node's, in a topology).
  redactor.learn(collectNames(snapshot));
  const text = (value: string) => redactor.text(value);
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(snapshot.metadata)) metadata[key] = text(value);
  metadata[REDACTED_METADATA] = REDACTED_CATEGORIES.join(",");
  metadata[REDACTION_KEY_METADATA] = redactor.keyId;
  return {
    ...snapshot,
    metadata: metadata as Snapshot["metadata"],
    measurements: snapshot.measurements.map((m): Measurement => ({
      ...m,
      subtypes: m.subtypes.map((s) => redactSubtype(s, redactor)),
    })),
  };
}

function redactSubtype(subtype: Subtype, redactor: Redactor): Subtype {
  const text = (value: string) => redactor.text(value);
  const data: Subtype["data"] = {};
  for (const [rawKey, value] of Object.entries(subtype.data)) {
    // A key is a path or a label, and may carry a name (`kubernetes.io/hostname.<node>`): keys
    // are redacted as values are, so two nodes' readings still line up key by key.
    const key = text(rawKey);
    if (typeof value !== "string") {
      data[key] = value;
      continue;
    }
    const host = REPOSITORY_KEY_REGEXP.test(rawKey)
      ? REPOSITORY_HOST_REGEXP.exec(value)?.[1]
      : undefined;
    data[key] = host === undefined
      ? text(value)
      : text(redactor.token(host) + value.slice(host.length));
  }
  const out: Subtype = { ...subtype, subtype: text(subtype.subtype), data };
  if (subtype.context) {
    out.context = Object.fromEntries(
      Object.entries(subtype.context).map(([k, v]) => [k, text(v)]),
    );
  }
  return out;
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

/** A run of name characters and dots: where a name may stand, whole or between dots. */
const NAME_RUN_REGEXP = /[A-Za-z0-9_.-]+/g;

/**
 * Replaces whole names only: `node-1` in `node-1.example.com`, `hostname.node-1` or
 * `GET node/node-1`, never in `node-12` or `my-node-1`. A name is found between the text's other
 * characters or dots, longest first, so a name inside a longer one goes with it. Linear in the
 * text, whatever the number of names (a fleet of 10,000 nodes learns 10,000).
 */
function replaceNames(value: string, names: ReadonlySet<string>, token: (v: string) => string) {
  if (names.size === 0) return value;
  return value.replace(NAME_RUN_REGEXP, (run) => {
    if (!run.includes(".")) return names.has(run) ? token(run) : run;
    const parts = run.split(".");
    const out: string[] = [];
    for (let i = 0; i < parts.length;) {
      let end = parts.length;
      while (end > i && !names.has(parts.slice(i, end).join("."))) end--;
      if (end > i) {
        out.push(token(parts.slice(i, end).join(".")));
        i = end;
      } else out.push(parts[i++] as string);
    }
    return out.join(".");
  });
}

/**
 * Replaces the addresses and registry hosts of one text (what does not depend on the names
 * learnt), each pattern tried only when the text has what it needs: a fleet's snapshots repeat
 * their texts, and most texts hold neither.
 */
function redactPatterns(value: string, token: (value: string) => string): string {
  let out = value;
  if (DIGIT_DOT_DIGIT_REGEXP.test(out)) {
    out = out.replace(IPV4_REGEXP, (ip) => isIP(ip) === 4 ? token(ip) : ip);
  }
  if (out.includes(":")) {
    out = out.replace(IPV6_REGEXP, (ip) => isIP(ip) === 6 ? token(ip) : ip);
  }
  // An image reference has a path and a tag (`:`) or a digest (`@`).
  if (out.includes("/") && (out.includes(":") || out.includes("@"))) {
    out = out.replace(IMAGE_REGEXP, (_, host: string, rest: string) => token(host) + rest);
  }
  return out;
}

/** Where an IPv4 address may be. */
const DIGIT_DOT_DIGIT_REGEXP = /\d\.\d/;
/** How many texts a redactor keeps the pattern pass of, before it starts again. */
const PATTERN_CACHE_SIZE = 65_536;

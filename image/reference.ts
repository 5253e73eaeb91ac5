/**
 * Image references as Docker and containerd read them: `[REGISTRY/]REPOSITORY[:TAG][@DIGEST]`.
 * The first part is a registry when it has a `.` or a `:` or is `localhost`; otherwise the
 * reference is Docker Hub's (`docker.io`, `library/` for one-part names).
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { type Digest, isDigest } from "./digest.ts";

/** A parsed reference. */
export interface ImageReference {
  /** Registry host (and port), e.g. `ghcr.io`, `10.0.0.1:5000`, `docker.io`. */
  registry: string;
  /** Repository path, e.g. `nvidia/aicr`. */
  repository: string;
  tag?: string;
  digest?: Digest;
}

const REPOSITORY_REGEXP =
  /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const TAG_REGEXP = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const HOST_REGEXP =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?$/;

/**
 * Parses a reference.
 *
 * @param text the reference as typed
 * @returns its parts
 * @throws {UsageError} naming the part that is not valid
 */
export function parseReference(text: string): ImageReference {
  const fail = (why: string) =>
    new UsageError(`Cannot use '${text}' as an image reference: ${why}`);
  let rest = text.trim();
  if (!rest) throw fail("it is empty");
  let digest: Digest | undefined;
  const at = rest.indexOf("@");
  if (at >= 0) {
    const d = rest.slice(at + 1);
    if (!isDigest(d)) throw fail(`'${d}' is not a sha256 digest`);
    digest = d;
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(":");
  if (colon > rest.lastIndexOf("/")) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG_REGEXP.test(tag)) throw fail(`'${tag}' is not a valid tag`);
  }
  const slash = rest.indexOf("/");
  const first = slash >= 0 ? rest.slice(0, slash) : "";
  let registry = "docker.io";
  let repository = rest;
  if (slash >= 0 && (first.includes(".") || first.includes(":") || first === "localhost")) {
    registry = first;
    repository = rest.slice(slash + 1);
    if (!HOST_REGEXP.test(registry)) throw fail(`'${registry}' is not a registry host`);
  } else if (!repository.includes("/")) {
    repository = `library/${repository}`;
  }
  if (!REPOSITORY_REGEXP.test(repository)) {
    throw fail(
      `'${repository}' is not a valid repository (lowercase letters, digits, . _ - and /)`,
    );
  }
  return { registry, repository, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}) };
}

/**
 * Writes a reference back.
 *
 * @param ref the parts
 * @returns `registry/repository[:tag][@digest]`
 */
export function formatReference(ref: ImageReference): string {
  return `${ref.registry}/${ref.repository}${ref.tag ? `:${ref.tag}` : ""}${
    ref.digest ? `@${ref.digest}` : ""
  }`;
}

/**
 * The host the distribution API of a registry answers on (Docker Hub's differs from its name).
 *
 * @param registry the reference's registry
 * @returns the API host
 */
export function apiHost(registry: string): string {
  return registry === "docker.io" ? "registry-1.docker.io" : registry;
}

/**
 * YAML text of manifests: 2-space indent, sequences indented under their key (the
 * layout `deno fmt` keeps, so goldens stay stable), no line folding.
 *
 * @module
 */
import { stringify } from "yaml";

/**
 * Formats one object as a YAML document.
 *
 * @param manifest any plain object
 * @returns the YAML text, ending in a newline
 */
export function formatManifest(manifest: unknown): string {
  return stringify(manifest, { indent: 2, lineWidth: 0 });
}

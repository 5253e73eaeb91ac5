/**
 * `aicr image list`: this version's image reference with its digest, in the forms mirroring tools
 * read: one reference a line (`plain`, for `skopeo sync`, `crane copy` or a script), a Hauler
 * `Images` manifest (`hauler store sync -f`), and a Zarf package config (`zarf package create`).
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { buildReference } from "./assemble.ts";
import { platformName } from "./oci.ts";
import { formatReference, parseReference } from "./reference.ts";
import { imageFromSource, type ImageSource } from "./source.ts";

/** The forms {@link listImage} prints. */
export const LIST_FORMATS = ["plain", "hauler", "zarf"] as const;

/** One of {@link LIST_FORMATS}. */
export type ListFormat = (typeof LIST_FORMATS)[number];

/** Options of {@link listImage}. */
export interface ListOptions {
  source: ImageSource;
  /** The repository (and tag) to name. @default this version's default image */
  image?: string;
  format: ListFormat;
}

/** What {@link listImage} found. */
export interface ImageList {
  /** The text to print. */
  text: string;
  /** `repository:tag@digest`. */
  reference: string;
  /** The platforms the digest covers. */
  platforms: string[];
}

/**
 * Renders the references in a form.
 *
 * @param references `repository:tag@digest` references
 * @param format the form
 * @param version the version (the Hauler and Zarf names)
 * @returns the text, ending with a newline
 */
export function renderImageList(
  references: readonly string[],
  format: ListFormat,
  version: string,
): string {
  if (format === "plain") return references.map((r) => `${r}\n`).join("");
  if (format === "hauler") {
    return [
      "apiVersion: content.hauler.cattle.io/v1",
      "kind: Images",
      "metadata:",
      `  name: aicr-${version}`,
      "spec:",
      "  images:",
      ...references.map((r) => `    - name: ${r}`),
      "",
    ].join("\n");
  }
  return [
    "kind: ZarfPackageConfig",
    "metadata:",
    "  name: aicr",
    `  version: ${JSON.stringify(version)}`,
    "components:",
    "  - name: aicr",
    "    required: true",
    "    images:",
    ...references.map((r) => `      - ${r}`),
    "",
  ].join("\n");
}

/**
 * Computes this version's image (its digest needs the binaries) and lists it.
 *
 * @param options source, repository, form
 * @returns the text and what it covers
 * @throws {UsageError} for a reference that carries a digest already
 */
export async function listImage(options: ListOptions): Promise<ImageList> {
  const image = await imageFromSource(options.source);
  try {
    const ref = parseReference(options.image ?? buildReference(image.build));
    if (ref.digest) {
      throw new UsageError(
        `Cannot list '${options.image}': give a repository (and tag), not a digest`,
      );
    }
    const tag = ref.tag ?? parseReference(buildReference(image.build)).tag;
    const reference = formatReference({
      ...ref,
      ...(tag ? { tag } : {}),
      digest: image.index.descriptor.digest,
    });
    return {
      text: renderImageList([reference], options.format, image.build.version),
      reference,
      platforms: image.platforms.map((p) => platformName(p.platform)),
    };
  } finally {
    await image.dispose();
  }
}

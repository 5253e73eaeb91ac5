/**
 * The aicr image, without Docker: assembled from the binaries and the pinned Debian base
 * (`assemble.ts`, `base.ts`), written as an OCI archive (`save.ts`), pushed over the OCI
 * distribution API with Docker-config credentials (`push.ts`), listed for mirroring tools
 * (`list.ts`). No knowledge of Kubernetes. `aicr image` and `scripts/release.ts` both call it, so
 * what an operator pushes is byte for byte what the release holds.
 *
 * ```ts ignore
 * const saved = await saveImage({ source: { self, cacheDir }, output: "aicr.tar" });
 * ```
 *
 * @module
 */
export {
  assembleImage,
  buildReference,
  checkBinaries,
  IMAGE_LAYOUT,
  inspectBinary,
} from "./assemble.ts";
export type { AssembledImage, BinaryBuild, ImageBinary } from "./assemble.ts";
export { writeArchive } from "./archive.ts";
export { BASE_INDEX_ASSET, baseAssetName, buildBaseLayer } from "./base.ts";
export type { BaseLayer, EmbeddedBase } from "./base.ts";
export { BASE_ARCHITECTURES, BASE_PACKAGES, BASE_SUITE } from "./base_packages.ts";
export type { BaseArchitecture, DebianPackage } from "./base_packages.ts";
export { LIST_FORMATS, listImage } from "./list.ts";
export type { ListFormat } from "./list.ts";
export { parsePlatform, platformName, PLATFORMS } from "./oci.ts";
export type { Platform } from "./oci.ts";
export { pushToRegistry } from "./push.ts";
export type { PushedImage, PushEvent } from "./push.ts";
export { saveImage } from "./save.ts";
export type { SavedImage } from "./save.ts";
export { defaultCacheDir, imageFromSource, platformOfProcess } from "./source.ts";
export type { ImageSource } from "./source.ts";

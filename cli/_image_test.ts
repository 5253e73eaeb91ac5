import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import { buildAgentJob } from "../manifests/job.ts";
import { chooseAgentImage, parseImagePlatforms, platformArchitectures } from "./_image.ts";
import { imageFlags } from "./image.ts";

const RELEASE = {
  version: "0.2.0",
  commit: "abc1234",
  backend: "node-sea",
  imageRepository: "ghcr.io/aicr-run/aicr",
};
const SOURCE = { ...RELEASE, version: "0.2.0-dev", commit: "unknown", backend: "source" };

Deno.test("image: a release deploys its own image, tagged with its version exactly, for both platforms", () => {
  assert.deepEqual(chooseAgentImage({}, RELEASE), {
    image: "ghcr.io/aicr-run/aicr:0.2.0",
    platforms: ["linux/amd64", "linux/arm64"],
    named: false,
    platformsFrom: "this build's release image",
  });
  const fork = chooseAgentImage({}, { ...RELEASE, imageRepository: "registry.example/ops/aicr" });
  assert.equal(fork.image, "registry.example/ops/aicr:0.2.0");
});

Deno.test("image: a source build deploys its release's image and says it is not this tree", () => {
  const chosen = chooseAgentImage({}, SOURCE);
  assert.equal(chosen.image, "ghcr.io/aicr-run/aicr:0.2.0");
  assert.match(
    chosen.warning ?? "",
    /source build of aicr \(0\.2\.0-dev\).*not this tree.*aicr image push REGISTRY\/REPO.*--image/,
  );
});

Deno.test("image: --image is taken for a release image's copy (both platforms) unless --image-platforms says", () => {
  const named = chooseAgentImage({ image: "r.example/aicr@sha256:00" }, RELEASE);
  assert.deepEqual(named.platforms, ["linux/amd64", "linux/arm64"]);
  assert.match(named.platformsFrom, /assumed for --image/);
  assert.equal(named.warning, undefined);
  const one = chooseAgentImage(
    { image: "r.example/aicr:1", imagePlatforms: "linux/amd64, linux/amd64" },
    RELEASE,
  );
  assert.deepEqual(one.platforms, ["linux/amd64"]);
  assert.deepEqual(platformArchitectures(["linux/arm64/v8", "linux/amd64"]), ["arm64", "amd64"]);
});

Deno.test("image: --image-platforms takes Linux platforms only, and at least one", () => {
  assert.throws(() => parseImagePlatforms(" , "), UsageError);
  assert.throws(
    () => parseImagePlatforms("linux/amd64,windows/amd64"),
    /'windows\/amd64' is not a Linux platform/,
  );
  assert.throws(() => parseImagePlatforms("amd64"), /'amd64' is not a Linux platform/);
});

Deno.test("image: the Job's pod lands only on nodes of the image's architectures", () => {
  const job = buildAgentJob(
    {
      namespace: "ns",
      runId: "20260101-000000-0123456789abcdef",
      invocationId: "0123456789abcdef",
      image: "ghcr.io/aicr-run/aicr:0.2.0",
      architectures: ["amd64"],
      serviceAccountName: "aicr",
      output: { namespace: "ns", name: "out" },
    } as Parameters<typeof buildAgentJob>[0],
  );
  assert.deepEqual(job.spec.template.spec.affinity, {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{
          matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64"] }],
        }],
      },
    },
  });
});

Deno.test("image push: the flags it prints add --image-platforms only for an image lacking a release platform", () => {
  const pinned = "r.example/aicr@sha256:" + "a".repeat(64);
  assert.equal(imageFlags(pinned, ["linux/amd64", "linux/arm64"]), `--image ${pinned}`);
  assert.equal(
    imageFlags(pinned, ["linux/amd64"]),
    `--image ${pinned} --image-platforms linux/amd64`,
  );
  // What the run then makes of them: pods only on amd64 nodes.
  assert.deepEqual(
    chooseAgentImage({ image: pinned, imagePlatforms: "linux/amd64" }).platforms,
    ["linux/amd64"],
  );
});

import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  flagOf,
  parseDuration,
  parseNodeRequirements,
  parseNodeSelectors,
  parseResourceList,
  parseTimeout,
  parseTolerations,
  withFlagNames,
} from "./_flags.ts";
import { runCli } from "./mod.ts";
import { fakeCli } from "../tests/fakes/cli.ts";

function usageMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof UsageError, String(error));
    return error.message;
  }
  assert.fail("no error");
}

Deno.test("flags: node selectors split on the first '=' and keep their order", () => {
  assert.deepEqual(parseNodeSelectors(["accelerator=nvidia-h100", "nvidia.com/gpu.present=true"]), {
    accelerator: "nvidia-h100",
    "nvidia.com/gpu.present": "true",
  });
  assert.deepEqual(parseNodeSelectors(["empty="]), { empty: "" });
  assert.deepEqual(parseNodeSelectors(["a=1", "a=1"]), { a: "1" });
  assert.deepEqual(parseNodeSelectors([]), {});
});

Deno.test("flags: a node selector Kubernetes would reject fails here, naming flag, value and format", () => {
  assert.equal(
    usageMessage(() => parseNodeSelectors(["accelerator"])),
    "Cannot parse '--node-selector' as it must be 'key=value': current value is 'accelerator'",
  );
  // Split on the first '=': the value "b=c" is not a label value.
  assert.match(
    usageMessage(() => parseNodeSelectors(["a=b=c"])),
    /^Cannot parse '--node-selector' as it must be 'key=value' \('b=c' is not a valid label value.*: current value is 'a=b=c'$/,
  );
  assert.match(usageMessage(() => parseNodeSelectors(["=x"])), /'' is not a valid label key/);
  assert.match(usageMessage(() => parseNodeSelectors(["a=1", "a=2"])), /'a' is already '1'/);
});

Deno.test("flags: tolerations follow the documented grammar", () => {
  assert.deepEqual(parseTolerations(["nvidia.com/gpu=present:NoSchedule"]), [
    { key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" },
  ]);
  assert.deepEqual(parseTolerations(["nvidia.com/gpu:NoSchedule"]), [
    { key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" },
  ]);
  assert.deepEqual(parseTolerations(["dedicated:PreferNoSchedule", "workload=batch:NoExecute"]), [
    { key: "dedicated", operator: "Exists", effect: "PreferNoSchedule" },
    { key: "workload", operator: "Equal", value: "batch", effect: "NoExecute" },
  ]);
  // An empty key is accepted: it tolerates every taint of that effect.
  assert.deepEqual(parseTolerations([":NoSchedule"]), [{
    operator: "Exists",
    effect: "NoSchedule",
  }]);
  assert.deepEqual(parseTolerations([]), []);
});

Deno.test("flags: tolerations need exactly one ':' and a case-sensitive effect", () => {
  assert.equal(
    usageMessage(() => parseTolerations(["nvidia.com/gpu"])),
    "Cannot parse '--toleration' as it must be 'key=value:effect' or 'key:effect' (exactly one ':'): current value is 'nvidia.com/gpu'",
  );
  assert.match(usageMessage(() => parseTolerations(["a:b:NoSchedule"])), /exactly one ':'/);
  assert.equal(
    usageMessage(() => parseTolerations(["a=b:noschedule"])),
    "Cannot parse '--toleration' as it must be 'key=value:effect' or 'key:effect' (the effect must be NoSchedule, PreferNoSchedule, NoExecute): current value is 'a=b:noschedule'",
  );
  assert.match(usageMessage(() => parseTolerations(["a=b:"])), /the effect must be/);
  assert.match(usageMessage(() => parseTolerations(["=b:NoSchedule"])), /a value needs a key/);
  assert.match(
    usageMessage(() => parseTolerations(["bad key:NoSchedule"])),
    /not a valid taint key/,
  );
});

Deno.test("flags: resource lists parse name=quantity pairs in order", () => {
  assert.deepEqual(parseResourceList("cpu=1,memory=4Gi", "--requests"), {
    cpu: "1",
    memory: "4Gi",
  });
  assert.deepEqual(
    parseResourceList(" cpu = 500m , nvidia.com/gpu=1, ephemeral-storage=1e9 ", "--limits"),
    { cpu: "500m", "nvidia.com/gpu": "1", "ephemeral-storage": "1e9" },
  );
  assert.deepEqual(parseResourceList("", "--limits"), {});
});

Deno.test("flags: a bad resource list names the flag, the value and the format", () => {
  assert.equal(
    usageMessage(() => parseResourceList("cpu=1,memory=4GB", "--requests")),
    "Cannot parse '--requests' as it must be comma-separated 'name=quantity' pairs, e.g. 'cpu=1,memory=4Gi' ('4GB' is not a Kubernetes quantity such as 500m, 2, 4Gi or 1e3): current value is 'cpu=1,memory=4GB'",
  );
  assert.match(usageMessage(() => parseResourceList("cpu", "--limits")), /'cpu' has no '='/);
  assert.match(usageMessage(() => parseResourceList("cpu=1,cpu=2", "--limits")), /given twice/);
  assert.match(
    usageMessage(() => parseResourceList("cpu=-1", "--limits")),
    /not a Kubernetes quantity/,
  );
  assert.match(
    usageMessage(() => parseResourceList("bad name=1", "--limits")),
    /not a resource name/,
  );
  assert.match(usageMessage(() => parseResourceList("cpu=1,", "--limits")), /'' has no '='/);
});

Deno.test("flags: durations read as Go reads them", () => {
  assert.equal(parseDuration("5m"), 300_000);
  assert.equal(parseDuration("90s"), 90_000);
  assert.equal(parseDuration("1h30m"), 5_400_000);
  assert.equal(parseDuration("1.5h"), 5_400_000);
  assert.equal(parseDuration("250ms"), 250);
  assert.equal(parseDuration("2m30s500ms"), 150_500);
  assert.equal(parseDuration("1500us"), 1.5);
  assert.equal(parseDuration("0"), 0);
  assert.equal(parseDuration("0s"), 0);
});

Deno.test("flags: a bad duration names the flag, the value and the format", () => {
  assert.equal(
    usageMessage(() => parseDuration("5")),
    "Cannot parse '--timeout' as it must be a duration such as '90s', '5m' or '1h30m' (units h, m, s, ms, us, ns): current value is '5'",
  );
  for (const bad of ["", "5 m", "-5m", "5d", "m", "1h 30m", "5M"]) {
    assert.throws(() => parseDuration(bad), UsageError, bad);
  }
  assert.match(usageMessage(() => parseDuration("x", "--interval")), /^Cannot parse '--interval'/);
});

Deno.test("parseTimeout() accepts 1s to 24h and refuses 0, 0s and longer waits, naming the flag", () => {
  assert.equal(parseTimeout("1s"), 1000);
  assert.equal(parseTimeout("24h"), 24 * 3_600_000);
  assert.equal(parseTimeout("5m", "--timeout"), 300_000);
  for (const value of ["0", "0s", "500ms", "999ms"]) {
    assert.throws(
      () => parseTimeout(value),
      (e) =>
        e instanceof UsageError &&
        e.message ===
          `Cannot parse '--timeout' as it must be a duration from 1s to 24h (omit the flag for its default): current value is '${value}'`,
    );
  }
  for (const value of ["24h1s", "25h", "100000000h", `${"9".repeat(400)}h`]) {
    assert.throws(
      () => parseTimeout(value),
      (e) =>
        e instanceof UsageError &&
        /^Cannot parse '--timeout' as it must be at most 24h/.test(e.message),
    );
  }
});

Deno.test("flagOf() gives an option's flag: kebab case, or the table's exception", () => {
  assert.equal(flagOf("image"), "--image");
  assert.equal(flagOf("imagePullSecret"), "--image-pull-secret");
  assert.equal(flagOf("maxNodesPerEntry"), "--max-nodes-per-entry");
  assert.equal(flagOf("serviceAccount"), "--add-roles-to-service-account");
});

Deno.test("withFlagNames() names flags in a library error and its causes, details included", () => {
  const inner = new UsageError((name) => `Cannot use '${name("runtimeClass")}': bad`, {
    details: [(name) => `  check ${name("nodeSelector")}`, "  plain"],
  });
  const outer = new UsageError((name) => `Cannot run with '${name("image")}'`, { cause: inner });
  assert.equal(outer.message, "Cannot run with 'image'");
  assert.deepEqual(inner.details, ["  check nodeSelector", "  plain"]);
  assert.equal(withFlagNames(outer), outer);
  assert.equal(outer.message, "Cannot run with '--image'");
  assert.equal(inner.message, "Cannot use '--runtime-class': bad");
  assert.deepEqual(inner.details, ["  check --node-selector", "  plain"]);
});

Deno.test("aicr names the flag in what the library refuses, as the user typed it", async () => {
  const offline = ["snapshot", "--dry-run", "--offline"];
  for (
    const [args, message] of [
      [
        [...offline, "--requests", "cpu=4", "--limits", "cpu=2"],
        "error: Cannot use '--requests' as the cpu request must not exceed its limit 2 (raise it with '--limits'): current value is 'cpu=4'",
      ],
      [[...offline, "--job-name", "Nightly"], "error: Cannot use '--job-name' as a name prefix"],
      [[...offline, "--runtime-class", "NVIDIA"], "error: Cannot use '--runtime-class' as"],
      [[...offline, "--image-pull-secret", "A_B"], "error: Cannot use '--image-pull-secret' as"],
      [[...offline, "-o", "cm://Bad/x"], "error: Cannot use '--output' value 'cm://Bad/x'"],
      [
        ["snapshot", "--add-roles-to-service-account", "Bad_SA"],
        "error: Cannot use '--add-roles-to-service-account' as it must be a DNS-1123 subdomain",
      ],
      [
        [...offline, "--image", " "],
        "error: Cannot use '--image' as it must be an image reference",
      ],
    ] as const
  ) {
    const h = fakeCli();
    assert.equal(await runCli([...args], h.deps), 2, args.join(" "));
    assert.ok(h.stderr().includes(message), `${args.join(" ")}: ${h.stderr()}`);
    assert.equal(h.connects(), 0, args.join(" "));
  }
});

Deno.test("parseNodeRequirements() reads kubectl's set-based and equality requirements on node labels", () => {
  assert.deepEqual(
    parseNodeRequirements([
      "node.kubernetes.io/instance-type in (p5.48xlarge, p6e-gb200.36xlarge)",
      "pool NotIn (spot)",
      "zone=us-east-1a",
      "tier!=batch",
      "nvidia.com/gpu.present",
      "!aicr.run/skip",
    ]),
    [
      {
        key: "node.kubernetes.io/instance-type",
        operator: "In",
        values: ["p5.48xlarge", "p6e-gb200.36xlarge"],
      },
      { key: "pool", operator: "NotIn", values: ["spot"] },
      { key: "zone", operator: "In", values: ["us-east-1a"] },
      { key: "tier", operator: "NotIn", values: ["batch"] },
      { key: "nvidia.com/gpu.present", operator: "Exists" },
      { key: "aicr.run/skip", operator: "DoesNotExist" },
    ],
  );
  for (const bad of ["pool in ()", "bad key", "pool in (a b)", "=x", "pool=bad value"]) {
    assert.throws(
      () => parseNodeRequirements([bad]),
      (error: unknown) =>
        error instanceof UsageError && /'--node-affinity'/.test(error.message) &&
        error.message.includes(`current value is '${bad}'`),
      bad,
    );
  }
});

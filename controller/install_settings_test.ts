import assert from "node:assert/strict";
import { UsageError } from "../errors.ts";
import {
  encodeInstallSettings,
  INSTALL_SETTINGS_ANNOTATION,
  type InstallSettings,
  mergeInstallSettings,
  parseInstallSettings,
  pickSettings,
  resolveInstallSettings,
  type SettingKind,
  type UpgradeSettings,
} from "./install_settings.ts";

const KINDS: Record<string, SettingKind> = {
  port: "string",
  nodeSelector: "strings",
  allNodes: "boolean",
  toleration: "strings",
  baselineInterval: "string",
};
const DEFAULTS: InstallSettings = { port: "8443", allNodes: false, baselineInterval: "60s" };

/** A stand-in for the CLI's flag checks: the port a whole number, selectors `k=v`. */
function toOptions(settings: InstallSettings): InstallSettings {
  if (!/^\d+$/.test(String(settings.port))) {
    throw new UsageError(`Cannot use '--port' as it must be a whole number: '${settings.port}'`);
  }
  if (settings.allNodes === true && (settings.nodeSelector as string[] | undefined)?.length) {
    throw new UsageError("Cannot use '--all-nodes' together with '--node-selector'");
  }
  return settings;
}

function upgrade(
  flags: InstallSettings,
  given: string[] = [],
): UpgradeSettings<InstallSettings> {
  return {
    kinds: KINDS,
    defaults: DEFAULTS,
    flags: { ...DEFAULTS, ...flags },
    given,
    linked: [["allNodes", "nodeSelector"]],
    toOptions,
  };
}

function daemonSet(annotation?: string) {
  return {
    metadata: {
      name: "aicr-daemon",
      namespace: "aicr-system",
      ...(annotation === undefined ? {} : {
        annotations: { [INSTALL_SETTINGS_ANNOTATION]: annotation },
      }),
    },
  };
}

const WHERE = { namespace: "aicr-system", name: "aicr-daemon" };

Deno.test("pickSettings() keeps the known settings of their kind, unset ones left out", () => {
  assert.deepEqual(
    pickSettings(KINDS, { port: "9443", toleration: undefined, timeout: "2m", allNodes: true }),
    { port: "9443", allNodes: true },
  );
});

Deno.test("encodeInstallSettings() sorts the keys: the same settings, the same annotation", () => {
  assert.equal(
    encodeInstallSettings({ port: "1", allNodes: false }),
    encodeInstallSettings({ allNodes: false, port: "1" }),
  );
  assert.equal(encodeInstallSettings({ port: "1" }), '{"port":"1"}');
});

Deno.test("parseInstallSettings() refuses what is not JSON, not an object, an unknown key, a wrong kind", () => {
  assert.deepEqual(parseInstallSettings('{"port":"9443"}', KINDS), { port: "9443" });
  assert.throws(() => parseInstallSettings("{port", KINDS), /not JSON/);
  assert.throws(() => parseInstallSettings('["port"]', KINDS), /not a JSON object/);
  assert.throws(() => parseInstallSettings("null", KINDS), /not a JSON object/);
  assert.throws(
    () => parseInstallSettings('{"hostPath":"/"}', KINDS),
    /'hostPath' is not a setting this build knows/,
  );
  assert.throws(() => parseInstallSettings('{"port":9443}', KINDS), /'port' must be a string/);
  assert.throws(
    () => parseInstallSettings('{"nodeSelector":"a=b"}', KINDS),
    /'nodeSelector' must be a list of strings/,
  );
  assert.throws(
    () => parseInstallSettings('{"toString":"x"}', KINDS),
    /'toString' is not a setting this build knows/,
  );
});

Deno.test("mergeInstallSettings() keeps each recorded setting the command line does not give", () => {
  const recorded = { port: "9443", toleration: ["a=b:NoSchedule"], baselineInterval: "30s" };
  // Nothing given: the install's, the defaults for what it did not record.
  assert.deepEqual(mergeInstallSettings(recorded, upgrade({})), {
    port: "9443",
    allNodes: false,
    toleration: ["a=b:NoSchedule"],
    baselineInterval: "30s",
  });
  // One given: only that one changes, even when it is the default's value.
  assert.deepEqual(mergeInstallSettings(recorded, upgrade({ port: "8443" }, ["port"])), {
    port: "8443",
    allNodes: false,
    toleration: ["a=b:NoSchedule"],
    baselineInterval: "30s",
  });
});

Deno.test("mergeInstallSettings() takes linked settings together: --node-selector replaces --all-nodes", () => {
  const merged = mergeInstallSettings(
    { allNodes: true },
    upgrade({ nodeSelector: ["pool=gpu"] }, ["nodeSelector"]),
  );
  assert.equal(merged.allNodes, false);
  assert.deepEqual(merged.nodeSelector, ["pool=gpu"]);
  // And --all-nodes drops a recorded selector.
  const all = mergeInstallSettings(
    { nodeSelector: ["pool=gpu"] },
    upgrade({ allNodes: true }, ["allNodes"]),
  );
  assert.equal(all.allNodes, true);
  assert.equal(all.nodeSelector, undefined);
});

Deno.test("resolveInstallSettings() of an older build's install: the command line alone", () => {
  const resolved = resolveInstallSettings(daemonSet(), upgrade({ port: "9000" }, ["port"]), WHERE);
  assert.equal(resolved.recorded, false);
  assert.equal(resolved.options.port, "9000");
  assert.equal(resolved.settings.port, "9000");
});

Deno.test("resolveInstallSettings() uses the recorded settings, a given flag overriding and recorded", () => {
  const ds = daemonSet('{"port":"9443","toleration":["a:NoSchedule"]}');
  const kept = resolveInstallSettings(ds, upgrade({}), WHERE);
  assert.equal(kept.recorded, true);
  assert.equal(kept.options.port, "9443");
  assert.deepEqual(kept.options.toleration, ["a:NoSchedule"]);
  const moved = resolveInstallSettings(ds, upgrade({ port: "9555" }, ["port"]), WHERE);
  assert.equal(moved.settings.port, "9555");
  assert.deepEqual(moved.settings.toleration, ["a:NoSchedule"]);
});

Deno.test("resolveInstallSettings() refuses a bad annotation naming the DaemonSet, the annotation and the fix", () => {
  for (
    const [text, why] of [
      ["not json", /it is not JSON/],
      ['{"extraArgs":["--listen=0.0.0.0"]}', /'extraArgs' is not a setting this build knows/],
      ['{"port":1}', /'port' must be a string/],
      ['{"port":"eighty"}', /Cannot use '--port' as it must be a whole number: 'eighty'/],
      ['{"allNodes":true,"nodeSelector":["a=b"]}', /together with '--node-selector'/],
    ] as const
  ) {
    const error = (() => {
      try {
        resolveInstallSettings(daemonSet(text), upgrade({}), WHERE);
      } catch (e) {
        return e;
      }
    })();
    assert.ok(error instanceof UsageError, `${text}: ${String(error)}`);
    assert.equal(error.code, "usage");
    assert.match(error.message, /Cannot upgrade the daemon 'aicr-system\/aicr-daemon'/);
    assert.match(error.message, /the annotation 'aicr\.run\/install-settings' of its DaemonSet/);
    assert.match(error.message, why);
    assert.match(String(error.details), /pass the install's flags explicitly/);
    assert.match(
      String(error.details),
      /kubectl annotate daemonset -n aicr-system aicr-daemon aicr\.run\/install-settings-/,
    );
  }
});

Deno.test("resolveInstallSettings() blames a given flag's clash on the flag, not on the annotation", () => {
  // The install recorded --all-nodes; --node-selector given replaces it (linked), no clash.
  const resolved = resolveInstallSettings(
    daemonSet('{"allNodes":true}'),
    upgrade({ nodeSelector: ["pool=gpu"] }, ["nodeSelector"]),
    WHERE,
  );
  assert.deepEqual(resolved.options.nodeSelector, ["pool=gpu"]);
  assert.equal(resolved.options.allNodes, false);
});

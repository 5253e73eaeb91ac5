import assert from "node:assert/strict";
import * as fsp from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { ConflictError, ToolError } from "../errors.ts";
import { rbacNextSteps, renderRbacFiles, writeRbacDirectory } from "./render.ts";
import type { RbacDirectoryFs } from "./render.ts";
import { renderedConfigMaps, renderedRbacObjects } from "./objects.ts";
import { assertGolden as assertGoldenFile } from "../tests/_golden.ts";

const RUN_ID = "20260103-103000-0123456789abcdef";
const OPTIONS = {
  namespace: "gpu-operator",
  serviceAccount: "irsa-snapshotter",
  runId: RUN_ID,
  version: "0.1.0",
};

/** Compares with `testdata/<name>` (see tests/_golden.ts for rewriting it). */
function assertGolden(name: string, actual: string): void {
  assertGoldenFile(new URL(`./testdata/${name}`, import.meta.url), actual);
}

Deno.test("render: the four files come in apply order into snapshot-rbac-<runID>", () => {
  const rendered = renderRbacFiles(OPTIONS);
  assert.equal(rendered.directory, `snapshot-rbac-${RUN_ID}`);
  assert.deepEqual(rendered.files.map((f) => f.name), [
    "01-role.yaml",
    "02-rolebinding.yaml",
    "03-clusterrole.yaml",
    "04-clusterrolebinding.yaml",
  ]);
});

Deno.test("render: the default files match their goldens", () => {
  for (const file of renderRbacFiles(OPTIONS).files) assertGolden(`rbac/${file.name}`, file.text);
});

Deno.test("render: the --discover-network ClusterRole matches its golden", () => {
  const file = renderRbacFiles({ ...OPTIONS, discoverNetwork: true }).files[2];
  assert.equal(file?.name, "03-clusterrole.yaml");
  assertGolden("rbac/03-clusterrole-discover-network.yaml", file?.text ?? "");
});

Deno.test("render: each file parses back to exactly the object it renders", () => {
  for (const discoverNetwork of [false, true]) {
    const grant = renderedRbacObjects({
      ...OPTIONS,
      discoverNetwork,
      configMaps: renderedConfigMaps(OPTIONS.serviceAccount),
    });
    const files = renderRbacFiles({ ...OPTIONS, discoverNetwork }).files;
    const objects = [grant.role, grant.roleBinding, grant.clusterRole, grant.clusterRoleBinding];
    files.forEach((file, i) => {
      const docs = parseAllDocuments(file.text);
      assert.ok(Array.isArray(docs) && docs.length === 1, file.name);
      assert.deepEqual(docs[0]?.toJS(), objects[i], file.name);
    });
  }
});

Deno.test("render: the headers explain every rule and the warning names every mutating rule", () => {
  const plain = renderRbacFiles(OPTIONS).files;
  assert.ok(!plain[2]?.text.includes("WARNING"));
  const wide = renderRbacFiles({ ...OPTIONS, discoverNetwork: true }).files[2]?.text ?? "";
  const header = wide.slice(0, wide.indexOf("apiVersion:"));
  for (
    const line of [
      "# - create, update, patch customresourcedefinitions.apiextensions.k8s.io",
      "# - create, delete namespaces",
      "# - create, delete daemonsets.apps",
      "# - create, delete serviceaccounts, configmaps",
      "# - create, delete roles.rbac.authorization.k8s.io, rolebindings.rbac.authorization.k8s.io",
      "# - create pods/exec",
      "# - patch nodes",
      "# - patch nicclusterpolicies.mellanox.com",
    ]
  ) {
    assert.ok(header.includes(`  ${line.slice(2)}`), line);
  }
  assert.ok(!header.includes("- get, list nicdevices"), "a read-only rule is not in the warning");
  assert.match(plain[1]?.text ?? "", /kubectl get serviceaccount irsa-snapshotter -n gpu-operator/);
  assert.match(plain[3]?.text ?? "", /kubectl get serviceaccount irsa-snapshotter -n gpu-operator/);
});

Deno.test("render: the next steps name the directory and the four commands", () => {
  assert.equal(
    rbacNextSteps({
      directory: `snapshot-rbac-${RUN_ID}`,
      namespace: "gpu-operator",
      serviceAccount: "irsa-snapshotter",
    }),
    [
      `wrote the RBAC for ServiceAccount "irsa-snapshotter" in namespace "gpu-operator" to snapshot-rbac-${RUN_ID}/ (nothing was applied)`,
      "",
      "next steps:",
      "  1. read what you are about to grant (each file explains its rules):",
      `       less snapshot-rbac-${RUN_ID}/*.yaml`,
      "  2. grant it:",
      `       kubectl apply -f snapshot-rbac-${RUN_ID}/`,
      "  3. take snapshots as that ServiceAccount:",
      "       aicr snapshot --namespace gpu-operator --service-account-name irsa-snapshotter",
      "  4. revoke the grant when the ServiceAccount no longer needs it:",
      `       kubectl delete -f snapshot-rbac-${RUN_ID}/`,
      "",
    ].join("\n"),
  );
  assert.match(
    rbacNextSteps({ directory: "d", namespace: "n", serviceAccount: "s", discoverNetwork: true }),
    /--service-account-name s --discover-network\n/,
  );
});

Deno.test("render: writeRbacDirectory writes the files into a new directory with real fs", async () => {
  const base = await fsp.mkdtemp(join(tmpdir(), "aicr-render-"));
  try {
    const { directory, files } = renderRbacFiles(OPTIONS);
    const dir = join(base, directory);
    await writeRbacDirectory(dir, files, fsp);
    assert.deepEqual((await fsp.readdir(dir)).sort(), files.map((f) => f.name));
    assert.equal(await fsp.readFile(join(dir, "03-clusterrole.yaml"), "utf8"), files[2]?.text);
    // A second write into the same directory is a CONFLICT and changes nothing.
    const error = await writeRbacDirectory(dir, [{ name: "01-role.yaml", text: "x" }], fsp)
      .then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof ConflictError);
    assert.equal(error.exitCode, 2);
    assert.equal(
      error.message,
      `Cannot write RBAC manifests to '${dir}' as the directory already exists: generate again for a fresh run ID, or remove it`,
    );
    assert.equal(await fsp.readFile(join(dir, "01-role.yaml"), "utf8"), files[0]?.text);
  } finally {
    await fsp.rm(base, { recursive: true });
  }
});

Deno.test("render: writeRbacDirectory never creates parents and writes through a temporary name", async () => {
  const calls: string[] = [];
  const fake: RbacDirectoryFs = {
    mkdir(path, options) {
      calls.push(`mkdir ${path} ${options.mode.toString(8)} ${JSON.stringify(options)}`);
      return Promise.resolve();
    },
    writeFile(path, _data, options) {
      calls.push(`write ${path} ${options.flag}`);
      return Promise.resolve();
    },
    rename(from, to) {
      calls.push(`rename ${from} ${to}`);
      return Promise.resolve();
    },
  };
  await writeRbacDirectory("d", [{ name: "01-role.yaml", text: "a" }], fake);
  assert.deepEqual(calls, [
    'mkdir d 755 {"mode":493}',
    "write d/.01-role.yaml.tmp wx",
    "rename d/.01-role.yaml.tmp d/01-role.yaml",
  ]);
  const missingParent = await writeRbacDirectory("a/b", [], {
    ...fake,
    mkdir: () =>
      Promise.reject(Object.assign(new Error("ENOENT: no such file"), { code: "ENOENT" })),
  }).then(() => undefined, (e: unknown) => e);
  assert.ok(missingParent instanceof ToolError && !(missingParent instanceof ConflictError));
  assert.equal(missingParent.message, "Cannot write RBAC manifests to 'a/b': ENOENT: no such file");
});

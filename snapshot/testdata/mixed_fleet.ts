/**
 * Test and bench support: a heterogeneous fleet (H100, GB200 and CPU system nodes) built from
 * the real captures: the `nvidia-smi -q -x` H100 capture (`tests/fixtures`), turned into the
 * GB200 one as the kubelet stand-in does (`nvidiaSmiXml`), parsed by the real GPU collector
 * parser; the node profiles (`tests/fixtures/node-profiles`) as Node objects, folded into
 * NodeTopology by the real topology collector. Not part of the library surface.
 *
 * @module
 */
import {
  foldOwnTopology,
  foldTopology,
  gpuUnavailable,
  parseNvidiaSmi,
} from "../../collectors/mod.ts";
import type { KubeNode } from "../../collectors/mod.ts";
import { loadProfiles, nodeObject, nvidiaSmiXml } from "../../tests/kubelet/profiles.ts";
import type { NodeProfile } from "../../tests/kubelet/profiles.ts";
import type { Measurement, Snapshot } from "../model.ts";
import { makeNodeSnapshot, setReading } from "./generate.ts";

/** Profile names in `tests/fixtures/node-profiles`. */
export type ProfileName = "p5-h100" | "p6-gb200" | "system-m7i";

/**
 * Nodes per profile for a fleet of `total`: 55 % H100, 30 % GB200, the rest CPU nodes.
 *
 * @param total nodes in all
 * @returns nodes per profile
 */
export function mixedCounts(total: number): Record<ProfileName, number> {
  const h100 = Math.floor(total * 0.55);
  const gb200 = Math.floor(total * 0.3);
  return { "p5-h100": h100, "p6-gb200": gb200, "system-m7i": total - h100 - gb200 };
}

/** Options for {@link makeMixedFleet}. */
export interface MixedFleetOptions {
  /** Extra node labels per node (e.g. a node pool), on top of the profile's. */
  labels?: (node: string, profile: ProfileName) => Record<string, string>;
  /** Boot seed per node (volatile readings). @default index + 1 */
  boot?: (node: string, index: number) => number;
  /** NodeTopology node lists cut to this many names, as `aicr agent --max-nodes-per-entry`. */
  maxNodesPerEntry?: number;
  /**
   * NodeTopology of the node's own Node alone, as a daemon reports it (`foldOwnTopology`:
   * entries naming only it, `summary` with `scope: node`, metadata `topology-scope: node`); the
   * fleet fetch lists the cluster's once. Its size does not grow with the cluster.
   */
  ownTopology?: boolean;
}

/**
 * Builds one snapshot per node of a mixed fleet. Node names are `<profile>-<n>`, e.g.
 * `p5-h100-3`.
 *
 * @param counts nodes per profile
 * @param options extra labels, boot seeds, node list cut
 * @returns snapshots in node order (H100, then GB200, then CPU nodes)
 */
export function makeMixedFleet(
  counts: Partial<Record<ProfileName, number>>,
  options: MixedFleetOptions = {},
): Snapshot[] {
  return [...generateMixedFleet(counts, options)];
}

type Plan = { node: string; profile: NodeProfile; name: ProfileName }[];

function fleetPlan(counts: Partial<Record<ProfileName, number>>): Plan {
  const profiles = loadProfiles();
  const plan: Plan = [];
  for (const name of ["p5-h100", "p6-gb200", "system-m7i"] as const) {
    const profile = profiles.get(name);
    if (!profile) throw new RangeError(`node profile ${name} missing from the fixtures`);
    for (let i = 1; i <= (counts[name] ?? 0); i++) {
      plan.push({ node: `${name}-${i}`, profile, name });
    }
  }
  return plan;
}

function fleetNodes(plan: Plan, options: MixedFleetOptions): KubeNode[] {
  return plan.map(({ node, profile, name }) => {
    const obj = nodeObject(profile, node, "127.0.0.1", 10250, "v1.33.5") as unknown as KubeNode;
    const labels = (obj.metadata ??= {}).labels ??= {};
    Object.assign(labels, options.labels?.(node, name) ?? {});
    return obj;
  });
}

/**
 * The Node objects of {@link makeMixedFleet}'s fleet (what a LIST of its nodes answers).
 *
 * @param counts nodes per profile
 * @param options extra labels
 * @returns the nodes, in the fleet's order
 */
export function mixedFleetNodes(
  counts: Partial<Record<ProfileName, number>>,
  options: MixedFleetOptions = {},
): KubeNode[] {
  return fleetNodes(fleetPlan(counts), options);
}

/**
 * {@link makeMixedFleet} one snapshot at a time, for fleets too large to hold (the bench's
 * 10,000 nodes). The NodeTopology readings of all snapshots share one set of strings.
 *
 * @param counts nodes per profile
 * @param options extra labels, boot seeds, node list cut
 * @returns the snapshots in node order
 */
export function* generateMixedFleet(
  counts: Partial<Record<ProfileName, number>>,
  options: MixedFleetOptions = {},
): Generator<Snapshot> {
  const plan = fleetPlan(counts);
  const nodes = fleetNodes(plan, options);
  const topology = foldTopology(nodes, { maxNodesPerEntry: options.maxNodesPerEntry ?? 0 });

  const gpuOf = new Map<string, Measurement>();
  for (const { profile } of plan) {
    if (gpuOf.has(profile.name)) continue;
    gpuOf.set(
      profile.name,
      profile.gpu
        ? { type: "GPU", subtypes: parseNvidiaSmi(nvidiaSmiXml(profile.gpu)) }
        : gpuUnavailable("absent", "nvidia-smi not found"),
    );
  }
  for (const [index, { node, profile }] of plan.entries()) {
    // Each snapshot's own topology is replaced by the cluster's below.
    const snapshot = makeNodeSnapshot(node, {
      clusterNodes: [node],
      boot: options.boot?.(node, index) ?? index + 1,
    });
    const gpu = structuredClone(gpuOf.get(profile.name) as Measurement);
    snapshot.measurements = snapshot.measurements.map((m) => {
      if (m.type === "GPU") return gpu;
      if (m.type !== "NodeTopology") return m;
      if (options.ownTopology) {
        // What a daemon reports: its own Node, folded by the real collector (scope node).
        const folded = foldOwnTopology(nodes[index] as KubeNode);
        const context = { status: "ok", source: `GET /api/v1/nodes/${node}` };
        return {
          type: "NodeTopology",
          subtypes: (["summary", "taint", "label"] as const).map((name) => ({
            subtype: name,
            data: folded[name],
            context,
          })),
        };
      }
      return {
        type: "NodeTopology",
        subtypes: m.subtypes.map((s) => ({
          ...s,
          // One object for every node, as in a real fleet the same readings (never mutated).
          data: topology[s.subtype as "summary" | "taint" | "label"],
        })),
      };
    });
    // A CPU node has no GPU stack loaded and no huge pages reserved for it.
    if (!profile.gpu) {
      for (const m of ["nvidia", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia_uvm"]) {
        setReading(snapshot, `OS.kmod.${m}`, undefined);
      }
      setReading(snapshot, "OS.grub.hugepages", undefined);
      setReading(snapshot, "OS.sysctl./proc/sys/vm/nr_hugepages", "0");
    }
    if (options.ownTopology) snapshot.metadata["topology-scope"] = "node";
    yield snapshot;
  }
}

/**
 * Fleet comparison: many node snapshots, first split into cohorts of nodes that should be
 * alike (GPU model and count, instance type, node pool: see `cohort.ts`), then grouped by
 * identical configuration per measurement type within each cohort. The largest group of
 * each type is the cohort's reference (ties go to the group holding the first node by
 * name); every node outside it is an outlier, listed with the readings where it differs
 * from the reference and how many nodes of its cohort share the reference value, e.g.
 * `gpu-node-17: GPU.smi.driver 570.86.15 (cohort: 570.124.06 on 41 nodes)`. A cohort of one
 * node has nothing to be compared with and is reported as such, never as drift.
 *
 * Readings compare as in {@link diffSnapshots} (schema types, NodeTopology node sets,
 * ignore patterns); per-node identity readings ({@link FLEET_IDENTITY_IGNORE_PATTERNS})
 * are left out on top, since they differ on every node by design.
 *
 * This module is the builder members are added to; the report's model is in `fleet_model.ts`,
 * how a member is read and interned in `fleet_reader.ts`, and the comparison by cohort in
 * `fleet_cohorts.ts`.
 *
 * @module
 */
import { finishFleet } from "./fleet_cohorts.ts";
import type { FleetMember, FleetOptions, FleetReport, FleetUnreadable } from "./fleet_model.ts";
import { createFleetTables, FleetReader } from "./fleet_reader.ts";

export {
  compareNodeNames,
  FLEET_CLUSTER_SCOPED_TYPES,
  FLEET_IDENTITY_IGNORE_PATTERNS,
} from "./fleet_model.ts";
export type {
  FleetAbsentSubtype,
  FleetCohort,
  FleetColumn,
  FleetDifference,
  FleetGroup,
  FleetMeasurement,
  FleetMember,
  FleetOptions,
  FleetOutlier,
  FleetReport,
  FleetUnreadable,
} from "./fleet_model.ts";

/**
 * Splits a fleet into cohorts, groups each cohort by configuration and finds its outliers.
 *
 * @param members the nodes and their snapshots, in any order
 * @param options ignore patterns, cohort keys, all readings
 * @returns the fleet report
 * @throws {UsageError} when a `groupBy` key is on no snapshot
 */
export function buildFleetReport(
  members: readonly FleetMember[],
  options: FleetOptions = {},
): FleetReport {
  const builder = createFleetBuilder(options);
  for (const member of members) builder.add(member);
  return builder.finish();
}

/** Builds a fleet report from members added one at a time (see {@link createFleetBuilder}). */
export interface FleetBuilder {
  /**
   * Reads one member; the builder keeps only its interned configuration, not the snapshot,
   * so a caller that parses one snapshot at a time holds one at a time.
   */
  add(member: FleetMember): void;
  /**
   * Reads one member straight from its YAML text in `encodeSnapshot`'s layout (what
   * `aicr daemonset fetch -o dir/` writes), as {@link FleetBuilder.add} reads the snapshot
   * `parseSnapshot` makes of it, without making it: each line is matched to the same line of
   * the last file and its path and value ids are remembered with it.
   *
   * @param text the document
   * @param nodeName the member's name from its `metadata.source-node` (`""` when absent)
   * @returns false, having read nothing, when the text departs from the layout or is not a
   *   valid snapshot in canonical order: the caller parses it (for its error) and calls `add`
   */
  addYaml(text: string, nodeName: (sourceNode: string) => string): boolean;
  /**
   * Records a member that could not be read (its file or document is corrupt, invalid or too
   * large): the report lists it as unreadable and compares the others.
   */
  unreadable(entry: FleetUnreadable): void;
  /**
   * Splits the members into cohorts and compares them.
   *
   * @throws {UsageError} when a `groupBy` key is on no snapshot
   */
  finish(): FleetReport;
}

/**
 * Makes a {@link FleetBuilder}: {@link buildFleetReport} for a fleet read one snapshot at a
 * time (10,000 snapshots need not be in memory at once).
 *
 * @param options ignore patterns, cohort keys, all readings
 * @returns the builder
 * @throws {UsageError} when `groupBy` combines `none` with other keys
 */
export function createFleetBuilder(options: FleetOptions = {}): FleetBuilder {
  const reader = new FleetReader(createFleetTables(options));
  const { unreadable } = reader.tables;
  return {
    // A member the comparison cannot take (whatever the reason) is reported, not fatal: one
    // odd node never loses the report of the others.
    add(member) {
      try {
        reader.add(member);
      } catch (error) {
        reader.rollBack();
        unreadable.push({ node: member.node, source: member.node, reason: firstLine(error) });
      }
    },
    addYaml(text, nodeName) {
      try {
        return reader.addYaml(text, nodeName);
      } catch {
        // Read again by parseSnapshot and `add`, which names the failure.
        reader.rollBack();
        return false;
      }
    },
    unreadable: (entry) => void unreadable.push({ ...entry }),
    finish: () => finishFleet(reader.tables),
  };
}

function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n")[0] ?? "";
}

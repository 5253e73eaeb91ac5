/**
 * The fleet comparison proper, once every member is read: the members split into cohorts, each
 * cohort grouped by configuration per measurement type, the largest group its reference, and
 * every other node's differences and absent subtypes found against it; then the report.
 *
 * @module
 */
import { compareNodeNames } from "./fleet_model.ts";
import type {
  FleetAbsentSubtype,
  FleetCohort,
  FleetColumn,
  FleetDifference,
  FleetMeasurement,
  FleetOutlier,
  FleetReport,
} from "./fleet_model.ts";
import { hashPairs, samePairs } from "./fleet_reader.ts";
import type { FleetTables, PathTable } from "./fleet_reader.ts";
import { compareKeys, MEASUREMENT_TYPES } from "./model.ts";
import type { MeasurementType, Reading } from "./model.ts";

/**
 * Counts each distinct (path, value) once per node of the cohort, after duplicates were
 * merged, and the nodes carrying each subtype ({@link resetCohortCounts} once it is done).
 *
 * @returns the measurement types the cohort carries
 */
function countCohort(
  tables: FleetTables,
  indices: readonly number[],
  subtypeLast: number[],
): Set<MeasurementType> {
  const { paths, configs, subtypeNodes } = tables;
  subtypeNodes.fill(0);
  const cohortTypes = new Set<MeasurementType>();
  for (const nodeIndex of indices) {
    for (const [type, pairs] of configs[nodeIndex] as Map<MeasurementType, Int32Array>) {
      cohortTypes.add(type);
      for (let i = 0; i < pairs.length; i += 2) {
        const table = paths[pairs[i] as number] as PathTable;
        table.counts[pairs[i + 1] as number]!++;
        table.present++;
        if (subtypeLast[table.sid] !== nodeIndex) {
          subtypeLast[table.sid] = nodeIndex;
          subtypeNodes[table.sid]!++;
        }
      }
    }
  }
  return cohortTypes;
}

function resetCohortCounts(tables: FleetTables, indices: readonly number[]): void {
  const { paths, configs } = tables;
  for (const nodeIndex of indices) {
    for (const pairs of (configs[nodeIndex] as Map<MeasurementType, Int32Array>).values()) {
      for (let i = 0; i < pairs.length; i += 2) {
        const table = paths[pairs[i] as number] as PathTable;
        table.counts[pairs[i + 1] as number] = 0;
        table.present = 0;
      }
    }
  }
}

/**
 * Groups the cohort's nodes by their configuration of one type: by a hash, confirmed by
 * comparing with the group's first. Largest group first; groups follow first appearance in
 * name order and the sort is stable, so ties go to the first node.
 */
function groupByConfiguration(
  tables: FleetTables,
  indices: readonly number[],
  type: MeasurementType,
): number[][] {
  const { configs } = tables;
  const groups: number[][] = [];
  const byHash = new Map<string, number[][]>();
  for (const i of indices) {
    const pairs = configs[i]?.get(type);
    const hash = pairs ? hashPairs(pairs) : "absent";
    let candidates = byHash.get(hash);
    if (!candidates) byHash.set(hash, candidates = []);
    let group = candidates.find((g) => samePairs(configs[g[0] as number]?.get(type), pairs));
    if (!group) {
      group = [];
      candidates.push(group);
      groups.push(group);
    }
    group.push(i);
  }
  return [...groups].sort((a, b) => b.length - a.length);
}

/**
 * Compares one cohort's nodes, type by type, with the largest group's configuration: the
 * groups, the columns the report shows, and each other node's differences and absent subtypes
 * (into `findings`).
 */
function compareCohort(
  tables: FleetTables,
  cohort: { indices: readonly number[]; types: Set<MeasurementType> },
  names: readonly string[],
  findings: NodeFindings,
): { measurements: FleetMeasurement[]; columns: Map<number, FleetColumn> } {
  const { paths, pathIds, configs, subtypeNodes, options } = tables;
  const { indices } = cohort;
  const measurements: FleetMeasurement[] = [];
  const columns = new Map<number, FleetColumn>();
  for (const type of MEASUREMENT_TYPES) {
    if (!cohort.types.has(type)) continue;
    const sorted = groupByConfiguration(tables, indices, type);
    const reference = sorted[0] as number[];
    measurements.push({
      type,
      groups: sorted.map((g) => ({
        nodes: g.map((i) => names[i] as string),
        majority: g === reference,
      })),
    });
    const refPairs = configs[reference[0] as number]?.get(type) ?? new Int32Array();
    const refMap = new Map<number, number>();
    for (let i = 0; i < refPairs.length; i += 2) {
      refMap.set(refPairs[i] as number, refPairs[i + 1] as number);
    }
    if (options.allReadings) {
      for (const [pid, vid] of refMap) {
        const table = paths[pid] as PathTable;
        columns.set(pid, {
          path: table.path,
          type,
          fleet: table.samples[vid] as Reading,
          fleetNodes: table.counts[vid] as number,
        });
      }
    }
    for (const group of sorted.slice(1)) {
      const pairs = configs[group[0] as number]?.get(type) ?? new Int32Array();
      const found = compareToReference(pairs, refMap, paths, indices.length);
      const gaps = absentSubtypes(found, refMap, paths, pathIds, subtypeNodes);
      for (const d of found) {
        const pid = pathIds.get(d.path) as number;
        if (!columns.has(pid)) {
          const column: FleetColumn = { path: d.path, type, fleetNodes: d.fleetNodes };
          if (d.fleet !== undefined) column.fleet = d.fleet;
          columns.set(pid, column);
        }
      }
      recordFindings(group, { found, gaps }, findings);
    }
  }
  return { measurements, columns };
}

/** The report of every member read: cohorts, their groups and columns, the outliers. */
export function finishFleet(tables: FleetTables): FleetReport {
  const { rawNames, cohortReader, subtypeNodes, configs } = tables;
  const names = uniqueNames(rawNames);
  const order = names.map((_, i) => i).sort((a, b) =>
    compareNodeNames(names[a] as string, names[b] as string)
  );
  const assignment = cohortReader.assign(names);
  const cohortMembers = membersByCohort(order, assignment.cohortOf);

  const findings: NodeFindings = { differences: new Map(), absences: new Map() };
  const cohorts: FleetCohort[] = [];
  const subtypeLast: number[] = subtypeNodes.map(() => -1);
  for (const [cohortName, indices] of cohortMembers) {
    const types = countCohort(tables, indices, subtypeLast);
    const compared = compareCohort(tables, { indices, types }, names, findings);
    resetCohortCounts(tables, indices);
    cohorts.push({
      name: cohortName,
      key: assignment.values.get(cohortName) ?? {},
      nodes: indices.map((i) => names[i] as string),
      measurements: compared.measurements,
      columns: [...compared.columns.values()].sort((a, b) => compareKeys(a.path, b.path)),
      outliers: indices.filter((i) => findings.differences.has(i)).length,
    });
  }
  const outliers = listOutliers(order, { names, cohortOf: assignment.cohortOf }, findings);
  const unreadable = [...tables.unreadable].sort((a, b) => compareNodeNames(a.node, b.node));
  return {
    nodes: order.map((i) => names[i] as string),
    groupBy: assignment.keys,
    cohorts,
    outliers,
    unreadable,
    summary: {
      nodes: configs.length,
      cohorts: cohorts.length,
      singletons: cohorts.filter((c) => c.nodes.length === 1).length,
      outliers: outliers.length,
      differences: outliers.reduce((sum, o) => sum + o.differences.length, 0),
      unreadable: unreadable.length,
    },
  };
}

/** Per node index: its differences from its cohort's majority, and the subtypes it lacks. */
interface NodeFindings {
  differences: Map<number, FleetDifference[]>;
  absences: Map<number, FleetAbsentSubtype[]>;
}

/** Adds one group's differences and absent subtypes to each of its nodes' findings. */
function recordFindings(
  group: readonly number[],
  compared: { found: readonly FleetDifference[]; gaps: readonly FleetAbsentSubtype[] },
  findings: NodeFindings,
): void {
  for (const i of group) {
    let list = findings.differences.get(i);
    if (!list) findings.differences.set(i, list = []);
    // One push per item: spreading a list as arguments overflows the stack past ~100,000.
    for (const d of compared.found) list.push(d);
    if (compared.gaps.length > 0) {
      let absent = findings.absences.get(i);
      if (!absent) findings.absences.set(i, absent = []);
      for (const gap of compared.gaps) absent.push(gap);
    }
  }
}

/** The members of each cohort (in `order`), largest cohort first, ties by name. */
function membersByCohort(
  order: readonly number[],
  cohortOf: readonly string[],
): Map<string, number[]> {
  const members = new Map<string, number[]>();
  for (const i of order) {
    const name = cohortOf[i] as string;
    let list = members.get(name);
    if (!list) members.set(name, list = []);
    list.push(i);
  }
  const names = [...members.keys()].sort((a, b) =>
    (members.get(b) as number[]).length - (members.get(a) as number[]).length ||
    compareKeys(a, b)
  );
  return new Map(names.map((name) => [name, members.get(name) as number[]]));
}

/** The nodes that differ from their cohort's majority, in `order`, findings sorted by path. */
function listOutliers(
  order: readonly number[],
  nodes: { names: readonly string[]; cohortOf: readonly string[] },
  found: NodeFindings,
): FleetOutlier[] {
  return order
    .filter((i) => found.differences.has(i))
    .map((i) => {
      const outlier: FleetOutlier = {
        node: nodes.names[i] as string,
        cohort: nodes.cohortOf[i] as string,
        differences: (found.differences.get(i) as FleetDifference[]).sort((a, b) =>
          compareKeys(a.path, b.path)
        ),
      };
      const absent = found.absences.get(i);
      if (absent) {
        outlier.absentSubtypes = absent.sort((a, b) => compareKeys(a.subtype, b.subtype));
      }
      return outlier;
    });
}

function absentSubtypes(
  found: readonly FleetDifference[],
  reference: Map<number, number>,
  paths: readonly PathTable[],
  pathIds: Map<string, number>,
  subtypeNodes: readonly number[],
): FleetAbsentSubtype[] {
  const refCounts = new Map<number, number>();
  for (const pid of reference.keys()) {
    const sid = (paths[pid] as PathTable).sid;
    refCounts.set(sid, (refCounts.get(sid) ?? 0) + 1);
  }
  const removed = new Map<number, number>();
  const other = new Set<number>();
  for (const d of found) {
    const sid = (paths[pathIds.get(d.path) as number] as PathTable).sid;
    if (d.kind === "removed") removed.set(sid, (removed.get(sid) ?? 0) + 1);
    else other.add(sid);
  }
  const out: FleetAbsentSubtype[] = [];
  for (const [sid, count] of removed) {
    if (other.has(sid) || count !== refCounts.get(sid)) continue;
    const table = paths.find((t) => t.sid === sid) as PathTable;
    out.push({ subtype: table.subtype, readings: count, fleetNodes: subtypeNodes[sid] as number });
  }
  return out;
}

function compareToReference(
  pairs: Int32Array,
  reference: Map<number, number>,
  paths: readonly PathTable[],
  nodeCount: number,
): FleetDifference[] {
  const out: FleetDifference[] = [];
  const seen = new Set<number>();
  for (let i = 0; i < pairs.length; i += 2) {
    const pid = pairs[i] as number;
    const vid = pairs[i + 1] as number;
    seen.add(pid);
    const table = paths[pid] as PathTable;
    const ref = reference.get(pid);
    if (ref === vid) continue;
    if (ref === undefined) {
      out.push({
        path: table.path,
        kind: "added",
        value: table.samples[vid] as Reading,
        fleetNodes: nodeCount - table.present,
      });
    } else {
      out.push({
        path: table.path,
        kind: "modified",
        value: table.samples[vid] as Reading,
        fleet: table.samples[ref] as Reading,
        fleetNodes: table.counts[ref] as number,
      });
    }
  }
  for (const [pid, ref] of reference) {
    if (seen.has(pid)) continue;
    const table = paths[pid] as PathTable;
    out.push({
      path: table.path,
      kind: "removed",
      fleet: table.samples[ref] as Reading,
      fleetNodes: table.counts[ref] as number,
    });
  }
  return out;
}

function uniqueNames(nodes: readonly string[]): string[] {
  const used = new Map<string, number>();
  return nodes.map((raw, i) => {
    const name = raw === "" ? `snapshot-${i + 1}` : raw;
    const count = (used.get(name) ?? 0) + 1;
    used.set(name, count);
    return count === 1 ? name : `${name}#${count}`;
  });
}

/**
 * A small snapshot for tests of both DaemonSet sides (the daemon's cache, the fleet fetch),
 * which share no code of their own.
 *
 * @module
 */
import { createSnapshot } from "../../snapshot/mod.ts";
import type { Measurement, Snapshot } from "../../snapshot/mod.ts";

/**
 * A small snapshot with GPU and OS measurements.
 *
 * @param options node name and how many extra sysctl keys to add (for bigger documents)
 * @returns the snapshot
 */
export function sampleSnapshot(options: { nodeName?: string; sysctls?: number } = {}): Snapshot {
  const { nodeName = "node-1", sysctls = 3 } = options;
  const sysctl: Record<string, string> = {};
  for (let i = 0; i < sysctls; i++) sysctl[`/proc/sys/kernel/key${i}`] = String(i * 7);
  const measurements: Measurement[] = [
    {
      type: "GPU",
      subtypes: [{
        subtype: "smi",
        data: { "gpu.model": "NVIDIA H100 80GB HBM3", "gpu-count": 8, driver: "560.35.03" },
        context: { status: "ok", source: "nvidia-smi -q -x" },
      }],
    },
    {
      type: "OS",
      subtypes: [
        { subtype: "release", data: { ID: "ubuntu", VERSION_ID: "24.04" } },
        { subtype: "sysctl", data: sysctl },
      ],
    },
  ];
  return createSnapshot(measurements, {
    timestamp: new Date("2026-03-21T10:30:00Z"),
    version: "0.1.0-dev",
    nodeName,
  });
}

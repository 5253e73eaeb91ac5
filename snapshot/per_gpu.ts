/**
 * Per-GPU readings shown once: a node's eight GPUs carry the same configuration keys
 * (`GPU.gpu-0.power.limit.current` … `GPU.gpu-7.power.limit.current`), so a change that is
 * the same on several GPUs is one line, `GPU.gpu-0..7.power.limit.current`, not eight.
 *
 * @module
 */

const PER_GPU_REGEXP = /^GPU\.gpu-(\d+)\.(.+)$/;

/** One displayed entry: a path (possibly a GPU range) and the items it stands for. */
export interface PerGpuEntry<T> {
  /** The path shown: the item's own, or `GPU.gpu-<range>.<key>` for a collapsed run. */
  path: string;
  /** The items behind it (one, or one per GPU of the range). */
  items: T[];
  /** The GPU indices of a collapsed entry, ascending; absent for a single item. */
  gpus?: number[];
}

/** Options for {@link collapsePerGpu}. */
export interface CollapseOptions<T> {
  /** The item's reading path. */
  path: (item: T) => string;
  /** Whether two items of the same key on different GPUs say the same thing. */
  same: (a: T, b: T) => boolean;
}

/**
 * Formats GPU indices as ranges: `[0,1,2,3]` → `0..3`, `[0,1,2,5,6]` → `0..2,5..6`, `[4]` → `4`.
 *
 * @param indices ascending GPU indices
 * @returns the range text
 */
export function formatGpuRange(indices: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < indices.length;) {
    let j = i;
    while (j + 1 < indices.length && indices[j + 1] === (indices[j] as number) + 1) j++;
    parts.push(j === i ? `${indices[i]}` : `${indices[i]}..${indices[j]}`);
    i = j + 1;
  }
  return parts.join(",");
}

/**
 * Collapses items that say the same thing about the same key on two or more GPUs into one
 * entry; every other item stays an entry of its own. Entries keep the order of the items,
 * a collapsed entry standing where its first item stood.
 *
 * @param items items in display order
 * @param options how to read an item's path and compare two items
 * @returns the entries to display
 */
export function collapsePerGpu<T>(
  items: readonly T[],
  options: CollapseOptions<T>,
): PerGpuEntry<T>[] {
  // key -> runs of items saying the same thing, each with its GPU indices
  const runs = new Map<string, { items: T[]; gpus: number[] }[]>();
  const slot: ({ key: string; run: { items: T[]; gpus: number[] } } | undefined)[] = [];
  for (const item of items) {
    const match = PER_GPU_REGEXP.exec(options.path(item));
    if (!match) {
      slot.push(undefined);
      continue;
    }
    const key = match[2] as string;
    let list = runs.get(key);
    if (!list) runs.set(key, list = []);
    let run = list.find((r) => options.same(r.items[0] as T, item));
    if (!run) list.push(run = { items: [], gpus: [] });
    run.items.push(item);
    run.gpus.push(Number(match[1]));
    slot.push({ key, run });
  }
  const out: PerGpuEntry<T>[] = [];
  const emitted = new Set<object>();
  items.forEach((item, i) => {
    const s = slot[i];
    if (!s || s.run.items.length < 2) {
      out.push({ path: options.path(item), items: [item] });
      return;
    }
    if (emitted.has(s.run)) return;
    emitted.add(s.run);
    const order = s.run.gpus.map((g, k) => [g, k] as const).sort((a, b) => a[0] - b[0]);
    const gpus = order.map(([g]) => g);
    out.push({
      path: `GPU.gpu-${formatGpuRange(gpus)}.${s.key}`,
      items: order.map(([, k]) => s.run.items[k] as T),
      gpus,
    });
  });
  return out;
}

/**
 * Writers to this process's standard output and error. A short-lived command (`aicr version`,
 * the agent's one log line) writes a few lines; Node makes `process.stdout` or `process.stderr`
 * on its first read, and for a pipe that is a `net.Socket`, which loads `net` and the stream
 * modules (about a tenth of `aicr version`'s instructions beyond an empty Node start). Node writes
 * to pipes, files and terminals synchronously on Linux anyway, so these writers do the same with
 * one `write(2)` per line and never make the stream unless they must.
 *
 * @module
 */
import { Buffer } from "node:buffer";
import { writeSync } from "node:fs";
import type { TextWriter } from "./log.ts";

/** The descriptors whose writer went over to the stream ({@link fdWriter}). */
const streamedDescriptors = new Set<number>();

/**
 * Whether a writer made by {@link fdWriter} for one of these descriptors went over to its stream,
 * which may still hold output that a `process.exit()` would lose. While none has, everything
 * written to them is written.
 *
 * @param fds the descriptors. @default stdout and stderr
 * @returns whether any did
 */
export function outputQueued(fds: readonly number[] = [1, 2]): boolean {
  return fds.some((fd) => streamedDescriptors.has(fd));
}

/**
 * A writer to a file descriptor, by synchronous writes, with the stream of that descriptor made
 * only when a write would block (a descriptor left non-blocking by whoever opened it): then that
 * write's rest and every later write go to the stream, in order. A reader that went away (EPIPE,
 * `aicr snapshot 2>&1 | head -1`) or a closed descriptor drops the output from then on, as the
 * stream's dropped error did: output is best effort, the command's cleanup is not (an unhandled
 * stream error would end the process before it ran).
 *
 * @param fd the descriptor (1 or 2)
 * @param stream makes the descriptor's stream (`process.stdout`), read at most once
 * @param write the synchronous write. @default `node:fs` writeSync
 * @returns the writer
 */
export function fdWriter(
  fd: number,
  stream: () => NodeJS.WritableStream,
  write: (fd: number, bytes: Uint8Array, offset: number) => number = writeSync,
): TextWriter {
  let made: NodeJS.WritableStream | undefined;
  let dropped = false;
  const toStream = (rest: string | Uint8Array) => {
    if (!made) {
      made = stream().on("error", () => {});
      streamedDescriptors.add(fd);
    }
    made.write(rest);
  };
  return {
    write: (text) => {
      if (dropped) return;
      if (made) return toStream(text);
      const bytes = Buffer.from(text, "utf8");
      let done = 0;
      try {
        while (done < bytes.length) done += write(fd, bytes, done);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "EAGAIN") {
          return toStream(bytes.subarray(done));
        }
        dropped = true;
      }
    },
  };
}

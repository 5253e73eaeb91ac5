import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fdWriter, outputQueued } from "./stdio.ts";

/** A stream stand-in that records what it was given and whether it was made. */
function recordingStream() {
  const chunks: string[] = [];
  let made = 0;
  const stream = {
    on: () => stream,
    write: (chunk: string | Uint8Array) => {
      chunks.push(typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk));
      return true;
    },
  };
  return {
    make: () => {
      made++;
      return stream as unknown as NodeJS.WritableStream;
    },
    text: () => chunks.join(""),
    made: () => made,
  };
}

function errno(code: string): Error {
  return Object.assign(new Error(code), { code });
}

Deno.test("fdWriter writes to the descriptor and never makes the stream", () => {
  const dir = mkdtempSync(join(tmpdir(), "aicr-stdio-"));
  try {
    const file = join(dir, "out");
    const fd = openSync(file, "w");
    const stream = recordingStream();
    const writer = fdWriter(fd, stream.make);
    writer.write("snapshot saved to file path=o.yaml\n");
    writer.write("ünïcode ✓\n");
    closeSync(fd);
    assert.equal(readFileSync(file, "utf8"), "snapshot saved to file path=o.yaml\nünïcode ✓\n");
    assert.equal(stream.made(), 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

Deno.test("fdWriter finishes a partial write, then hands a blocked one to the stream in order", () => {
  const written: string[] = [];
  let calls = 0;
  const stream = recordingStream();
  const writer = fdWriter(1, stream.make, (_fd, bytes, offset) => {
    calls++;
    if (calls === 3) throw errno("EAGAIN");
    // Two bytes at a time, as a full pipe may take them.
    const n = Math.min(2, bytes.length - offset);
    written.push(new TextDecoder().decode(bytes.subarray(offset, offset + n)));
    return n;
  });
  writer.write("abcdef");
  writer.write("gh");
  assert.equal(written.join(""), "abcd");
  assert.equal(stream.text(), "efgh");
  assert.equal(stream.made(), 1);
});

Deno.test("fdWriter drops its output once the reader is gone, without throwing", () => {
  let calls = 0;
  const stream = recordingStream();
  const writer = fdWriter(2, stream.make, () => {
    calls++;
    throw errno("EPIPE");
  });
  writer.write("one\n");
  writer.write("two\n");
  assert.equal(calls, 1);
  assert.equal(stream.made(), 0);
});

Deno.test("outputQueued says when a descriptor's writer went over to its stream", () => {
  // Descriptors no other test writes through, so the process-wide record starts clean for them.
  const stream = recordingStream();
  const writer = fdWriter(97, stream.make, (_fd, _bytes, offset) => {
    if (offset === 0) return 2;
    throw errno("EAGAIN");
  });
  const untouched = fdWriter(98, recordingStream().make, (_fd, bytes) => bytes.length);
  untouched.write("all of it\n");
  assert.equal(outputQueued([97, 98]), false);
  writer.write("abcdef");
  assert.equal(outputQueued([97]), true);
  assert.equal(outputQueued([98]), false);
  assert.equal(stream.text(), "cdef");
});

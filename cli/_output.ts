/**
 * One spelling across verbs, as upstream and kubectl-style tools use it: `-o/--output` says where
 * a document goes (a file, `-` for stdout, `cm://<namespace>/<name>`), `-t/--format` says how it
 * is written. `-o json` is the kubectl habit that would silently write a file named `json`, so a
 * bare format word there is refused, naming `-t/--format`; `./json` still names that file.
 *
 * @module
 */
import { UsageError } from "../errors.ts";

/** Format words that, given alone to `-o`, mean the user wanted `-t`. */
export const FORMAT_WORDS: readonly string[] = [
  "json",
  "yaml",
  "yml",
  "wide",
  "table",
  "text",
  "html",
];

/**
 * Refuses a bare format word as `-o/--output`.
 *
 * @param value the `--output` value
 * @param options the formats this verb's `-t/--format` accepts (named in the message)
 * @returns the value, unchanged
 * @throws {UsageError} naming `-t/--format` and the `./<word>` spelling for a file of that name
 */
export function checkOutputNotFormat(
  value: string | undefined,
  options: { formats?: readonly string[] } = {},
): string | undefined {
  if (value === undefined || !FORMAT_WORDS.includes(value.trim().toLowerCase())) return value;
  const formats = options.formats ? ` (${options.formats.join(", ")})` : "";
  throw new UsageError(
    `Cannot use '-o ${value}': '-o/--output' names where the output goes (a file, '-' or cm://<namespace>/<name>), and the format is '-t/--format'${formats}`,
    {
      details: [
        `  for ${value}: -t ${value}`,
        `  to write a file named '${value}': -o ./${value}`,
      ],
    },
  );
}

/**
 * One spelling across verbs, as upstream and kubectl-style tools use it: `-o/--output` says where
 * a document goes (a file, `-` for stdout, `cm://<namespace>/<name>`), `-t/--format` says how it
 * is written. `-o json` is the kubectl habit that would silently write a file named `json`, so a
 * bare format word there is refused, naming `-t/--format`; `./json` still names that file.
 *
 * @module
 */
import { UsageError } from "../errors.ts";
import { isSnapshotFormat } from "../snapshot/mod.ts";
import type { SnapshotFormat, SnapshotTarget } from "../snapshot/mod.ts";

/**
 * A snapshot verb's `-t/--format`: `yaml` or `json` (a document), or `table` (a view for a
 * terminal: the document is collected as YAML and rendered; never into a ConfigMap).
 *
 * @param value the `--format` value
 * @param target the parsed `--output`
 * @returns the document format and whether to render a table
 * @throws {UsageError} for another value, or `table` into a ConfigMap
 */
export function snapshotFormatFlag(
  value: string,
  target: SnapshotTarget,
): { format: SnapshotFormat; table: boolean } {
  if (value === "table") {
    if (target.kind === "configmap") {
      throw new UsageError(
        "Cannot write '-t table' to a ConfigMap: a table is a view for a terminal; use -t yaml or -t json",
      );
    }
    return { format: "yaml", table: true };
  }
  if (!isSnapshotFormat(value)) {
    throw new UsageError(
      `Cannot use '--format' as it must be 'yaml', 'json' or 'table': current value is '${value}'`,
    );
  }
  return { format: value, table: false };
}

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

/**
 * `--template`: upstream renders the snapshot with Go's text/template plus Sprig. No maintained
 * JavaScript library implements both faithfully (Go's template grammar, its pipelines and its
 * Sprig function set), and a look-alike would render the same template differently without
 * saying so; refusing, with the route that works everywhere, is the honest answer.
 *
 * @param value the `--template` value
 * @throws {UsageError} whenever it is given
 */
export function refuseTemplate(value: string | undefined): void {
  if (value === undefined) return;
  throw new UsageError(
    `Cannot use '--template ${value}': Go text/template with Sprig functions is not supported in aicr (no maintained JavaScript implementation renders them faithfully)`,
    {
      details: [
        "  render from the JSON document instead, e.g.:",
        "    aicr snapshot -t json | jq -r '.measurements[] | select(.type == \"GPU\") | .subtypes[].data'",
      ],
    },
  );
}

/**
 * `aicr image save|push|list`: the agent image of this binary, without Docker, podman or the
 * internet. Each subcommand parses its flags into one options object and makes one call into
 * `image/`; progress goes to stderr (a bar on a terminal), results to stdout.
 *
 * @module
 */
import { Command, Option } from "commander";
import process from "node:process";
import { UsageError } from "../errors.ts";
import {
  defaultCacheDir,
  type ImageBinary,
  type ImageSource,
  LIST_FORMATS,
  type ListFormat,
  listImage,
  parsePlatform,
  platformOfProcess,
  type PushEvent,
  pushToRegistry,
  saveImage,
} from "../image/mod.ts";
import { singleExecutablePath } from "../runtime.ts";
import { buildInfo, RELEASE_PLATFORMS } from "../version.ts";
import type { CliDeps } from "./context.ts";
import type { Logger } from "../log.ts";
import { defineAction, type VerbContext } from "./globals.ts";

/** The flags every subcommand shares: where the binaries come from. */
interface SourceFlags {
  binary: string[];
  from?: string;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function addSourceOptions(command: Command): Command {
  return command
    .option(
      "--binary <platform=path>",
      "the aicr binary of a platform (linux/amd64, linux/arm64); repeat for each (default: this binary for its own platform)",
      collect,
      [],
    )
    .option("--from <dir>", "a release folder: its aicr-<version>-linux-<arch> binaries");
}

/**
 * How an image verb reports: its logger from the root's flags (`--log-json`, `-q`), and whether a
 * progress bar may be drawn (a terminal, text logs, not quiet).
 */
interface ImageOutput {
  log: Logger;
  bar: boolean;
}

function imageOutput(deps: CliDeps, { globals, log }: VerbContext): ImageOutput {
  return { log, bar: deps.stderrIsTerminal && !globals.logJson && !globals.quiet };
}

/** Parses the source flags (Complete + Validate). */
function imageSource(deps: CliDeps, flags: SourceFlags, log: Logger): ImageSource {
  const binaries: ImageBinary[] = flags.binary.map((value) => {
    const eq = value.indexOf("=");
    const platform = eq > 0 ? parsePlatform(value.slice(0, eq)) : undefined;
    if (!platform || eq === value.length - 1) {
      throw new UsageError(
        `Cannot parse '--binary' as it must be 'linux/amd64=PATH' or 'linux/arm64=PATH': current value is '${value}'`,
      );
    }
    return { platform, path: value.slice(eq + 1) };
  });
  const selfPath = singleExecutablePath();
  const selfPlatform = platformOfProcess(process.arch);
  return {
    binaries,
    ...(flags.from ? { releaseDir: flags.from } : {}),
    ...(selfPath && selfPlatform ? { self: { platform: selfPlatform, path: selfPath } } : {}),
    cacheDir: defaultCacheDir(deps.env),
    log: (line) => log.info(line),
    signal: deps.signal,
  };
}

const MIB = 1024 * 1024;

/** A progress bar on a terminal (one line, redrawn), else nothing. */
function progressBar(
  deps: CliDeps,
  output: ImageOutput,
  label: string,
): (done: number, total: number) => void {
  if (!output.bar) return () => {};
  let last = -1;
  return (done, total) => {
    const percent = total > 0 ? Math.floor((done / total) * 100) : 100;
    if (percent === last) return;
    last = percent;
    const width = 30;
    const filled = Math.round((percent / 100) * width);
    deps.stderr.write(
      `\r${label} [${"#".repeat(filled)}${"-".repeat(width - filled)}] ${percent}% ${
        (done / MIB).toFixed(1)
      }/${(total / MIB).toFixed(1)} MiB${percent === 100 ? "\n" : ""}`,
    );
  };
}

function saveCommand(deps: CliDeps): Command {
  const command = addSourceOptions(
    new Command("save")
      .description("write the image as an OCI archive (ctr images import, skopeo, podman load)")
      .option("-o, --output <file>", "the archive (default: aicr-<version>.tar)"),
  );
  return defineAction(command, deps, async (flags: SourceFlags & { output?: string }, context) => {
    const output = flags.output ?? `aicr-${buildInfo().version}.tar`;
    const report = imageOutput(deps, context);
    const saved = await saveImage({
      source: imageSource(deps, flags, report.log),
      output,
      signal: deps.signal,
      progress: progressBar(deps, report, "writing"),
    });
    report.log.info(
      `wrote ${saved.path} (${(saved.bytes / MIB).toFixed(1)} MiB, ${
        saved.platforms.join(", ")
      }): ${saved.reference}@${saved.digest}`,
    );
  });
}

/** Flags of `aicr image push`. */
interface PushFlags extends SourceFlags {
  caFile?: string;
  plainHttp: boolean;
  registryConfig?: string;
}

function pushProgress(deps: CliDeps, output: ImageOutput): (event: PushEvent) => void {
  const bar = progressBar(deps, output, "uploading");
  const { log } = output;
  let total = 0;
  let done = 0;
  let current = 0;
  return (event) => {
    const short = event.digest.slice(7, 19);
    if (event.kind === "blob" && event.state === "uploading") {
      total = event.size;
      done = 0;
      current = 0;
      if (!output.bar) log.info(`uploading blob ${short} (${(event.size / MIB).toFixed(1)} MiB)`);
    } else if (event.kind === "blob" && event.state === "exists") {
      log.info(`blob ${short} already there (${(event.size / MIB).toFixed(1)} MiB)`);
    } else if (event.kind === "sent") {
      current = event.bytes;
      bar(done + current, total);
    } else if (event.kind === "manifest") {
      log.info(`manifest ${event.platform} ${short}`);
    } else if (event.kind === "index") {
      log.info(`index ${short} tagged ${event.tag}`);
    }
  };
}

function pushCommand(deps: CliDeps): Command {
  const command = addSourceOptions(
    new Command("push")
      .description("push the image to a registry over the OCI distribution API")
      .argument("<image>", "REGISTRY/REPOSITORY[:TAG] (tag default: this version's)")
      .option("--ca-file <file>", "a PEM CA to trust besides the system's")
      .option("--plain-http", "speak plain HTTP to the registry (no TLS)", false)
      .addOption(
        new Option(
          "--registry-config <file>",
          "Docker config with the credentials (default: REGISTRY_AUTH_FILE, ~/.docker/config.json)",
        ),
      ),
  );
  return defineAction(command, deps, async (flags: PushFlags, context, cmd) => {
    const target = cmd.processedArgs[0] as string;
    const report = imageOutput(deps, context);
    const pushed = await pushToRegistry({
      source: imageSource(deps, flags, report.log),
      target,
      ...(flags.caFile ? { caFile: flags.caFile } : {}),
      plainHttp: flags.plainHttp,
      ...(flags.registryConfig ? { registryConfig: flags.registryConfig } : {}),
      env: deps.env,
      signal: deps.signal,
      progress: pushProgress(deps, report),
    });
    const use = imageFlags(pushed.pinned, pushed.platforms);
    report.log.info(
      `pushed ${pushed.repository}:${pushed.tag} (${
        pushed.platforms.join(", ")
      }; ${pushed.uploaded} blob(s) uploaded, ${pushed.skipped} already there)`,
    );
    report.log.info(`digest: ${pushed.digest}`);
    report.log.info(`use it with: aicr snapshot ${use}  (or aicr daemonset install ${use})`);
    deps.stdout.write(`${pushed.pinned}\n`);
  });
}

/**
 * The flags that deploy a pushed image: `--image REPO@sha256:...`, and `--image-platforms` when it
 * lacks a platform of a release image (pushed from one binary alone), which a run would otherwise
 * assume it has.
 */
export function imageFlags(pinned: string, platforms: readonly string[]): string {
  const all = RELEASE_PLATFORMS.every((p) => platforms.includes(p));
  return `--image ${pinned}${all ? "" : ` --image-platforms ${platforms.join(",")}`}`;
}

function listCommand(deps: CliDeps): Command {
  const command = addSourceOptions(
    new Command("list")
      .description("print this version's image reference with its digest, for mirroring tools")
      .addOption(
        new Option("-t, --format <format>", "plain, hauler or zarf").default("plain"),
      )
      .option(
        "--image <repository>",
        "the repository (and tag) to name (default: this version's image)",
      ),
  );
  return defineAction(command, deps, async (
    flags: SourceFlags & { format: string; image?: string },
    context,
  ) => {
    if (!(LIST_FORMATS as readonly string[]).includes(flags.format)) {
      throw new UsageError(
        `Cannot list as '--format' must be ${
          LIST_FORMATS.map((f) => `'${f}'`).join(", ")
        }: current value is '${flags.format}'`,
      );
    }
    const { log } = context;
    const listed = await listImage({
      source: imageSource(deps, flags, log),
      format: flags.format as ListFormat,
      ...(flags.image ? { image: flags.image } : {}),
    });
    if (listed.platforms.length < 2) {
      log.info(
        `note: the digest covers ${
          listed.platforms.join(", ")
        } only; the release's image (linux/amd64 and linux/arm64) has its own: give --from <release folder> or --binary for the other platform`,
      );
    }
    deps.stdout.write(listed.text);
  });
}

/**
 * The `image` command and its subcommands.
 *
 * @param deps CLI dependencies
 * @returns the command
 */
export function imageCommand(deps: CliDeps): Command {
  return new Command("image")
    .description("save, push or list aicr's own agent image (no Docker, podman or internet needed)")
    .addCommand(saveCommand(deps))
    .addCommand(pushCommand(deps))
    .addCommand(listCommand(deps));
}

/**
 * Proving the agent that ran is this build: every run reads what the agent says it is (the
 * snapshot document's `apiVersion` and `metadata.version`; the agent's termination message's
 * `version` and `commit`, when it wrote one) and compares it with this CLI's build. Another
 * program (NVIDIA's Go aicr writes an `aicr.nvidia.com/v1alpha1` snapshot with its own version,
 * and no termination message) or another version or commit of aicr is one clear error naming the
 * image, what ran and the fix; the run's cleanup goes on as for any failure.
 *
 * A source run (`0.1.0-dev`, commit unknown) cannot name its own commit: it accepts an aicr agent
 * of the release it is a development of, and checks the program and version only.
 *
 * @module
 */
import { type ErrorText, ToolError } from "../errors.ts";
import { API_VERSION, LEGACY_API_VERSION } from "../snapshot/mod.ts";
import type { Snapshot } from "../snapshot/mod.ts";
import { isSourceBuild, releaseVersion } from "../version.ts";
import type { BuildInfo } from "../version.ts";

/** What the agent says it is. */
export interface AgentBuild {
  /** `aicr` (this project), `upstream` (NVIDIA's Go aicr) or `unknown`. */
  program: "aicr" | "upstream" | "unknown";
  /** Its version, as it wrote it, if it wrote one. */
  version?: string;
  /** Its commit, when its termination message names one. */
  commit?: string;
  /** The document's apiVersion, for a program this does not know. */
  apiVersion?: string;
}

/** The agent that ran is not this build (exit 8, as a failed agent Job). */
export class AgentIdentityError extends ToolError {
  /**
   * @param message what ran instead
   * @param details the fix
   */
  constructor(message: string, details: readonly ErrorText[] = AGENT_IDENTITY_FIX) {
    super(message, "internal", 502, { details });
    this.name = "AgentIdentityError";
  }
}

/**
 * Reads what a snapshot and the agent's termination message say about the agent.
 *
 * @param snapshot the document the agent wrote
 * @param termination the agent container's termination message (JSON), if any
 * @returns the agent's program, version and commit
 */
export function agentBuildOf(snapshot: Snapshot, termination?: string): AgentBuild {
  const version = snapshot.metadata?.version;
  const said = parseTermination(termination);
  if (snapshot.apiVersion === LEGACY_API_VERSION) {
    return { program: "upstream", ...(version ? { version } : {}) };
  }
  if (snapshot.apiVersion !== API_VERSION) {
    return {
      program: "unknown",
      apiVersion: String(snapshot.apiVersion),
      ...(version ? { version } : {}),
    };
  }
  return {
    program: "aicr",
    ...(said.version ?? version ? { version: said.version ?? version } : {}),
    ...(said.commit ? { commit: said.commit } : {}),
  };
}

function parseTermination(text: string | undefined): { version?: string; commit?: string } {
  if (!text) return {};
  try {
    const parsed = JSON.parse(text) as { version?: unknown; commit?: unknown };
    return {
      ...(typeof parsed.version === "string" ? { version: parsed.version } : {}),
      ...(typeof parsed.commit === "string" ? { commit: parsed.commit } : {}),
    };
  } catch {
    return {};
  }
}

/**
 * Names a build for a message: `aicr 0.2.0 (commit 3c5f0d2)`.
 *
 * @param build version and commit
 * @returns the name
 */
export function describeBuild(build: { version: string; commit?: string }): string {
  return `aicr ${build.version}${
    build.commit && build.commit !== "unknown" ? ` (commit ${build.commit})` : ""
  }`;
}

/**
 * Describes what ran, for the error: `NVIDIA's Go aicr v0.11.1`, `aicr 0.1.0 (commit ...)`.
 *
 * @param agent what the agent said
 * @returns the description
 */
export function describeAgent(agent: AgentBuild): string {
  if (agent.program === "upstream") {
    return `NVIDIA's Go aicr${agent.version ? ` ${agent.version}` : ""}`;
  }
  if (agent.program === "unknown") {
    return `a program that is not aicr (its document is '${agent.apiVersion}')`;
  }
  return agent.version ? describeBuild({ version: agent.version, ...agent }) : "aicr";
}

/**
 * Names the build an agent must be, for a message: `aicr 0.2.0 (commit 3c5f0d2)`; a source build
 * by its release's version alone (it deploys that release's image).
 *
 * @param self this CLI's build
 * @returns the name
 */
export function describeSelf(self: BuildInfo): string {
  return isSourceBuild(self) ? `aicr ${releaseVersion(self.version)}` : describeBuild(self);
}

/** Where the agent's identity was read, for the message. */
export interface AgentSite {
  /** What cannot be used: `the snapshot`, `node gpu-1's snapshot`. @default "the snapshot" */
  what?: string;
  /** Who ran: `the agent`, `the daemon`. @default "the agent" */
  who?: string;
}

/**
 * Checks the agent is this build.
 *
 * @param agent what the agent said
 * @param self this CLI's build
 * @param image the image the run deployed
 * @param site what was read and from whom, for the message
 * @throws {AgentIdentityError} when it is another program, version or commit
 */
export function checkAgentBuild(
  agent: AgentBuild,
  self: BuildInfo,
  image: string,
  site: AgentSite = {},
): void {
  const { what = "the snapshot", who = "the agent" } = site;
  const source = isSourceBuild(self);
  const want = source ? releaseVersion(self.version) : self.version;
  const sameProgram = agent.program === "aicr";
  const sameVersion = sameProgram && agent.version !== undefined &&
    (source ? releaseVersion(agent.version) : agent.version) === want;
  const sameCommit = source || agent.commit === undefined || self.commit === "unknown" ||
    agent.commit === self.commit;
  if (sameProgram && sameVersion && sameCommit) return;
  const expected = describeSelf(self);
  throw new AgentIdentityError(
    `Cannot use ${what} as ${who} that ran is ${
      describeAgent(agent)
    }, not ${expected}: the image '${image}' is not this build's`,
    AGENT_IDENTITY_FIX,
  );
}

/** The fix for an image that is not this build's (detail lines, indented). */
export const AGENT_IDENTITY_FIX: readonly ErrorText[] = [
  (option) =>
    `  push this binary's own image ('aicr image push REGISTRY/REPO') and pass the ${
      option("image")
    } REPO@sha256:... it prints`,
  (option) => `  or pass ${option("image")} with the image of this exact version and commit`,
];

/**
 * What a program that is not aicr says when a DaemonSet runs it with aicr's `daemon` verb:
 * NVIDIA's Go aicr (urfave/cli) refuses the verb's flags ("flag provided but not defined") or the
 * verb itself ("No help topic for 'daemon'"), and other CLIs say "unknown command".
 */
const FOREIGN_DAEMON_EXIT =
  /flag provided but not defined|No help topic for 'daemon'|unknown command "?daemon|executable file not found/;

/**
 * Whether a daemon container's last line says its program has no `daemon` verb.
 *
 * @param line the last line it left (its termination message, from its log)
 * @returns true for another program
 */
export function isForeignDaemonExit(line: string | undefined): boolean {
  return line !== undefined && FOREIGN_DAEMON_EXIT.test(line);
}

/**
 * Says what ran instead of the daemon: the node, the exit code, the program's last line and the
 * image.
 *
 * @param pod the node and how its container exited
 * @param image the DaemonSet's image, if known
 * @returns the message (after `Cannot ...: `)
 */
export function foreignDaemonMessage(
  pod: { node: string; exited?: { code: number; line?: string } },
  image?: string,
): string {
  const upstream = /flag provided but not defined|No help topic for 'daemon'/.test(
    pod.exited?.line ?? "",
  );
  return `the daemon that ran on node '${pod.node}' is ${
    upstream ? "NVIDIA's Go aicr" : "not aicr"
  }: it exited ${pod.exited?.code ?? "?"} on the 'daemon' verb ('${pod.exited?.line ?? ""}'): ${
    image ? `the image '${image}'` : "its image"
  } is not this build's`;
}

/**
 * The line of a log that is NVIDIA's Go aicr's own (its logger's `command failed: error=[CODE]
 * ... exitCode=N`, or the slog `ERROR command failed error="..." exitCode=N`), if one is: how a
 * failed agent that wrote no snapshot is still recognised. aicr never logs so.
 *
 * @param log the agent's log tail
 * @returns the line, or undefined
 */
export function upstreamLogLine(log: string): string | undefined {
  // deno-lint-ignore no-control-regex -- its lines are coloured with ANSI escapes
  return log.split("\n").map((l) => l.replace(/\u001b\[[0-9;]*m/g, "").trim())
    .filter((l) => /command failed:? error=(\[[A-Z_]+\]|").*exitCode=\d+/.test(l)).at(-1);
}

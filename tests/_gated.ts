/**
 * Tests that need something a machine may not have (root, a kernel feature, a package). They are
 * registered whatever the machine: when it cannot run them they are registered as ignored, the
 * reason after the name, so every run lists them as skipped (a failure under `CI=true`) instead
 * of losing them.
 *
 * @module
 */

/**
 * A test definition that runs only where nothing it needs is missing, for `Deno.test` to
 * register.
 *
 * @param unavailable why this machine cannot run it, or undefined when it can
 * @param definition the test
 * @returns the definition as is, or ignored with the reason after its name
 */
export function gated(
  unavailable: string | undefined,
  definition: Deno.TestDefinition,
): Deno.TestDefinition {
  if (unavailable === undefined) return definition;
  return { ...definition, name: `${definition.name} (skipped: ${unavailable})`, ignore: true };
}

/**
 * Kubernetes resource quantities (`500m`, `4Gi`, `1e3`): the check the resource-list
 * parser and the request-against-limit check share.
 *
 * @module
 */

// A Kubernetes quantity, non-negative (resource requirements reject negatives):
// a decimal number and a binary-SI, decimal-SI or decimal-exponent suffix.
const QUANTITY_REGEXP = /^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/;
const SUFFIX_FACTORS: Record<string, number> = {
  "": 1,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/**
 * Checks a Kubernetes quantity such as `1`, `500m`, `4Gi`, `1.5`, `1e3`.
 *
 * @param value any string
 * @returns whether Kubernetes accepts it as a (non-negative) resource quantity
 */
export function isQuantity(value: string): boolean {
  return QUANTITY_REGEXP.test(value);
}

/**
 * The approximate numeric value of a quantity (`500m` → 0.5, `1Ki` → 1024), enough to
 * compare a request with its limit.
 *
 * @param value a quantity
 * @returns its value
 * @throws {RangeError} when `value` is not a quantity
 */
export function quantityValue(value: string): number {
  const match = QUANTITY_REGEXP.exec(value);
  if (!match) {
    throw new RangeError(`Cannot read quantity as it is malformed: current value is "${value}"`);
  }
  const number = Number(match[1]);
  const suffix = match[3] ?? "";
  if (/^[eE]/.test(suffix)) return number * 10 ** Number(suffix.slice(1));
  return number * (SUFFIX_FACTORS[suffix] ?? 1);
}

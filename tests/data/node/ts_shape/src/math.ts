export function add(a: number, b: number): number {
  return a + b;
}

export function clamp(value: number, low: number, high: number): number {
  if (low > high) {
    throw new RangeError(`empty range ${low}..${high}`);
  }
  return Math.min(Math.max(value, low), high);
}

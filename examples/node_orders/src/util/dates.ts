/** Delivery dates: business days only. */

const DAY_MS = 24 * 60 * 60 * 1000;

export function isBusinessDay(date: Date): boolean {
  const day = date.getUTCDay();
  return day !== 0 && day !== 6;
}

/** The date `days` business days after `start` (UTC), skipping weekends. */
export function addBusinessDays(start: Date, days: number): Date {
  if (!Number.isInteger(days) || days < 0) {
    throw new RangeError(`days must be a non-negative integer, got ${days}`);
  }
  let current = new Date(start.getTime());
  let left = days;
  while (left > 0) {
    current = new Date(current.getTime() + DAY_MS);
    if (isBusinessDay(current)) {
      left -= 1;
    }
  }
  return current;
}

/** "2024-03-05" for a date (UTC). */
export function isoDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

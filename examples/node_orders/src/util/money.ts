/** Money as integer cents: parsing user input and formatting for receipts. */

export class MoneyError extends Error {}

/** "12.5" or "12.50" or "$12.50" -> 1250 cents. */
export function parseCents(text: string): number {
  const cleaned = text.trim().replace(/^\$/, "");
  if (!/^\d+(\.\d{1,2})?$/.test(cleaned)) {
    throw new MoneyError(`not an amount: ${JSON.stringify(text)}`);
  }
  const [whole, fraction = ""] = cleaned.split(".");
  return Number(whole) * 100 + Number(fraction.padEnd(2, "0"));
}

/** 1250 -> "$12.50"; negative amounts get a leading minus. */
export function formatCents(cents: number): string {
  if (!Number.isInteger(cents)) {
    throw new MoneyError(`cents must be an integer, got ${cents}`);
  }
  const sign = cents < 0 ? "-" : "";
  const abs = Math.abs(cents);
  return `${sign}$${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, "0")}`;
}

/** Split `cents` into `parts` shares that differ by at most one cent and sum to `cents`. */
export function splitCents(cents: number, parts: number): number[] {
  if (!Number.isInteger(parts) || parts < 1) {
    throw new MoneyError(`parts must be a positive integer, got ${parts}`);
  }
  const base = Math.floor(cents / parts);
  const extra = cents - base * parts;
  return Array.from({ length: parts }, (_, i) => base + (i < extra ? 1 : 0));
}

import { formatMoney } from "./format";
import { clamp } from "./math";

export interface Line {
  cents: number;
  quantity: number;
}

export function total(lines: Line[], currency: string): string {
  const cents = lines.reduce((sum, line) => sum + line.cents * clamp(line.quantity, 0, 99), 0);
  return formatMoney({ cents, currency });
}

export interface Money {
  cents: number;
  currency: string;
}

export function formatMoney(money: Money): string {
  const sign = money.cents < 0 ? "-" : "";
  const abs = Math.abs(money.cents);
  const units = Math.floor(abs / 100);
  const cents = String(abs % 100).padStart(2, "0");
  return `${sign}${units}.${cents} ${money.currency}`;
}

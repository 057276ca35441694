export const CURRENCIES = ["EUR", "USD"] as const;

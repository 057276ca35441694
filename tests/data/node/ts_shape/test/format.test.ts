import { formatMoney } from "../src/format";

test("formats cents with two digits", () => {
  expect(formatMoney({ cents: 1205, currency: "EUR" })).toBe("12.05 EUR");
});

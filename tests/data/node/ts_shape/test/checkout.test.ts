import { CURRENCIES, total } from "../src";

test("totals the lines of a cart in its currency", () => {
  const lines = [
    { cents: 250, quantity: 2 },
    { cents: 1000, quantity: 1 },
  ];
  expect(total(lines, CURRENCIES[0])).toBe("15.00 EUR");
});

import { total, isEmpty } from "../src/cart.js";

test("sums price times quantity", () => {
  expect(total([{ sku: "a", price: 2, quantity: 3 }])).toBe(6);
});

test("an empty cart", () => {
  expect(isEmpty([])).toBe(true);
});

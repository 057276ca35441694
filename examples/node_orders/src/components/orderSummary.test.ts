/**
 * @jest-environment jsdom
 */
import { renderOrderSummary } from "./orderSummary";

describe("renderOrderSummary", () => {
  it("renders", () => {
    const order = { id: 1, customer: "ada", status: "open" as const, lines: [] };
    expect(renderOrderSummary(order)).toBeTruthy();
  });
});

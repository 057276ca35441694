import { MoneyError, formatCents, parseCents, splitCents } from "./money";

describe("parseCents", () => {
  it.each([
    ["12", 1200],
    ["12.5", 1250],
    ["$12.50", 1250],
    [" 0.07 ", 7],
  ])("parses %p as %p cents", (text, cents) => {
    expect(parseCents(text)).toBe(cents);
  });

  it("rejects text that is not an amount", () => {
    expect(() => parseCents("12.345")).toThrow(new MoneyError('not an amount: "12.345"'));
  });
});

describe("formatCents", () => {
  it("formats dollars and cents", () => {
    expect(formatCents(1250)).toBe("$12.50");
    expect(formatCents(-5)).toBe("-$0.05");
  });

  it("rejects fractional cents", () => {
    expect(() => formatCents(1.5)).toThrow("cents must be an integer, got 1.5");
  });
});

describe("splitCents", () => {
  it("spreads the remainder over the first shares", () => {
    expect(splitCents(100, 3)).toEqual([34, 33, 33]);
  });
});

import { add, clamp } from "../src/math";

describe("add", () => {
  it("adds", () => {
    expect(add(1, 2)).toBe(3);
  });
});

describe("clamp", () => {
  it("keeps a value inside the range", () => {
    expect(clamp(5, 0, 10)).toBe(5);
    expect(clamp(-1, 0, 10)).toBe(0);
  });
});

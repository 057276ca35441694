import { Stack } from "./stack";

describe("Stack", () => {
  it("pops what was pushed last", () => {
    const stack = new Stack<number>();
    stack.push(1);
    stack.push(2);
    expect(stack.pop()).toBe(2);
  });

  it("counts its items", () => {
    const stack = new Stack<string>();
    stack.push("a");
    expect(stack.size).toBe(1);
  });
});

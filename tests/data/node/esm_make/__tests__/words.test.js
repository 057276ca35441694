import { countWords } from "../src/words.js";

test("counts each word", () => {
  const counts = countWords("a b a");
  expect(counts.get("a")).toBe(2);
  expect(counts.get("b")).toBe(1);
});

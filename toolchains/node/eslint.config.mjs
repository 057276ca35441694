// The small default ESLint configuration Autopilot lints tests with when a project has none of
// its own: ESLint's and typescript-eslint's recommended rules, plus the fixable habits that keep
// generated tests tidy (prefer-const, no-var). `any` and `require` stay allowed: test doubles
// and `jest.requireActual` need them.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

const TS = ["**/*.ts", "**/*.tsx", "**/*.mts", "**/*.cts"];
const names = (list) => Object.fromEntries(list.map((name) => [name, "readonly"]));
const globals = names([
  // Jest
  "describe", "it", "test", "expect", "jest", "beforeAll", "beforeEach", "afterAll", "afterEach",
  "fit", "fdescribe", "xit", "xdescribe", "xtest",
  // Node
  "require", "module", "exports", "process", "console", "Buffer", "__dirname", "__filename",
  "global", "globalThis", "setTimeout", "clearTimeout", "setInterval", "clearInterval",
  "setImmediate", "clearImmediate", "queueMicrotask", "structuredClone", "URL", "URLSearchParams",
  "TextEncoder", "TextDecoder", "AbortController", "fetch", "Response", "Request", "Headers",
  // DOM (jsdom tests)
  "window", "document", "navigator", "HTMLElement", "Element", "Node", "Event", "CustomEvent",
  "KeyboardEvent", "MouseEvent",
]);

export default [
  { ignores: ["**/node_modules/**", "**/.autopilot-tmp/**", "**/dist/**", "**/coverage/**"] },
  js.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: "latest",
      sourceType: "module",
      globals,
      parserOptions: { ecmaFeatures: { jsx: true } },
    },
    rules: { "prefer-const": "error", "no-var": "error" },
  },
  { files: ["**/*.cjs"], languageOptions: { sourceType: "commonjs" } },
  ...tseslint.configs.recommended.map((config) => ({ ...config, files: TS })),
  {
    files: TS,
    rules: {
      "no-undef": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-require-imports": "off",
    },
  },
];

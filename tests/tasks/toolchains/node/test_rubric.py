"""The static rubric for Jest test files (tree-sitter JavaScript/TypeScript grammars)."""

from __future__ import annotations

import pytest

from tasks.toolchains.node.rubric import RULES, analyse, dialect_for

GOOD = """
import { parseCents } from "./money";

describe("parseCents", () => {
  it.each([["1", 100], ["2.5", 250]])("parses %s", (text, cents) => {
    expect(parseCents(text)).toBe(cents);
  });

  test("rejects junk", () => {
    expect(() => parseCents("x")).toThrow('not an amount: "x"');
  });

  it("checks through a helper", () => {
    expectCents("3", 300);
  });

  it("uses node's assert", () => {
    assert.strictEqual(parseCents("4"), 400);
  });

  it("checks a response", async () => {
    await request(app).get("/orders").expect(200);
  });

  it("awaits a promise", async () => {
    await expect(load()).resolves.toEqual({ ok: true });
  });

  it.todo("handles euros");
});

function expectCents(text: string, cents: number): void {
  expect(parseCents(text)).toBe(cents);
}
"""


def rules(path: str, text: str, source: str | None = None) -> list[tuple[int, str]]:
    findings, _ = analyse(path, text, source)
    return [(f.line, f.rule) for f in findings]


def test_a_good_file_has_no_finding() -> None:
    findings, tests = analyse("src/money.test.ts", GOOD)
    assert findings == []
    assert tests == 6  # it.each counts once; it.todo is no test


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("parse('1');", "no-assertion"),
        ("expect(parse('1'));", "no-assertion"),  # no matcher: checks nothing
        ("expect.assertions(1);", "no-assertion"),
        ("expect(parse('1')).toBeTruthy();", "vague-matcher"),
        ("expect(a).toBeDefined(); expect(b).toBeFalsy();", "vague-matcher"),
        ("expect(a).not.toBeUndefined();", "vague-matcher"),
        ("expect(a).not.toBeNull();", "vague-matcher"),
        ("expect(render()).toMatchSnapshot();", "snapshot-only"),
        ("expect(render()).toMatchInlineSnapshot(`x`);", "snapshot-only"),
        ("expect(() => run()).not.toThrow();", "not-raise-error"),
    ],
)
def test_weak_tests(body: str, rule: str) -> None:
    text = f'it("t", () => {{\n  {body}\n}});\n'
    assert rules("a.test.js", text) == [(1, rule)]


@pytest.mark.parametrize(
    "body",
    [
        "expect(a).toBeTruthy(); expect(a.id).toBe(3);",
        "expect(render()).toMatchSnapshot(); expect(title()).toBe('x');",
        "expect(() => run()).not.toThrow(); expect(run()).toEqual([1]);",
        "expect(a).toBeNull();",
        "expect(spy).toHaveBeenCalledWith(1, 2);",
    ],
)
def test_a_precise_check_beside_a_weak_one_is_fine(body: str) -> None:
    assert rules("a.test.ts", f'test("t", () => {{ {body} }});\n') == []


def test_bare_to_throw_and_sleep_and_over_mocking() -> None:
    text = (
        'test("t", async () => {\n'
        "  expect(() => run()).toThrow();\n"
        "  await new Promise((r) => setTimeout(r, 100));\n"
        "  jest.fn(); jest.fn(); jest.spyOn(a, 'b'); jest.fn();\n"
        "  expect(run()).toBe(1);\n"
        "});\n"
    )
    assert rules("a.test.ts", text) == [
        (1, "over-mocking"),
        (2, "raises-without-match"),
        (3, "sleep"),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('it.only("a", () => { expect(1).toBe(1); });', [(1, "focused-test")]),
        ('fit("a", () => { expect(1).toBe(1); });', [(1, "focused-test")]),
        ('describe.only("s", () => {});', [(1, "focused-test")]),
        ('test.skip("a", () => { expect(1).toBe(1); });', [(1, "skipped-test")]),
        ('xit("a", () => { expect(1).toBe(1); });', [(1, "skipped-test")]),
        ('xdescribe("s", () => {});', [(1, "skipped-test")]),
        ('it.skip.each([1])("a %i", (n) => { expect(n).toBe(1); });', [(1, "skipped-test")]),
    ],
)
def test_focus_and_skip_left_in(text: str, expected: list[tuple[int, str]]) -> None:
    assert rules("a.test.js", text) == expected


@pytest.mark.parametrize(
    ("path", "mock", "source", "hit"),
    [
        ("src/money.test.ts", "./money", None, True),
        ("src/__tests__/money.test.ts", "../money", None, True),
        ("test/money.spec.js", "../src/money", None, True),
        ("src/orders/index.test.ts", "./index", None, False),
        ("src/orders.test.ts", "./orders/index", "src/orders/index.ts", True),
        ("src/money.test.ts", "./clock", None, False),
        ("src/money.test.ts", "money", None, False),  # a package of the same name
        ("test/a.spec.ts", "../src/money", "src/money.ts", True),
        ("test/a.spec.ts", "../src/other", "src/money.ts", False),
    ],
)
def test_mocking_the_module_under_test(path: str, mock: str, source: str | None, hit: bool) -> None:
    text = f'jest.mock("{mock}");\ntest("t", () => {{ expect(f()).toBe(1); }});\n'
    assert (rules(path, text, source) == [(1, "mock-under-test")]) is hit


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("a.test.ts", 'it("x", () => { expect(f(1).toBe(1); });'),
        ("a.test.js", "describe('x', () => {"),
        ("a.test.tsx", "it('x', () => { render(<A b={1 />); });"),
    ],
)
def test_unparseable_files(path: str, text: str) -> None:
    findings, tests = analyse(path, text)
    assert [f.rule for f in findings] == ["syntax"] and tests == 0


def test_jsx_and_typescript_dialects() -> None:
    assert dialect_for("a.test.tsx") == "tsx"
    assert dialect_for("a.test.mts") == "typescript"
    assert dialect_for("a.test.jsx") == "javascript"
    jsx = (
        'it("x", () => { render(<Summary order={o} />); expect(screen.getByRole("x")).toBe(y); });'
    )
    assert analyse("a.test.jsx", jsx) == ([], 1)
    assert analyse("a.test.tsx", jsx) == ([], 1)
    typed = 'it("x", () => { const v = <number>f(); expect(v as number).toBe(1); });'
    assert analyse("a.test.ts", typed) == ([], 1)


def test_every_rule_is_listed_for_the_judge() -> None:
    ids = {r.id for r in RULES}
    emitted = {
        "syntax",
        "no-assertion",
        "vague-matcher",
        "snapshot-only",
        "not-raise-error",
        "raises-without-match",
        "sleep",
        "over-mocking",
        "mock-under-test",
        "focused-test",
        "skipped-test",
    }
    assert ids == emitted
    assert {r.id for r in RULES if r.forbidden} == {
        "syntax",
        "no-assertion",
        "not-raise-error",
        "mock-under-test",
        "focused-test",
    }


def test_hostile_nesting_does_not_crash() -> None:
    text = 'it("x", () => { expect(' + "[" * 5000 + "]" * 5000 + ").toEqual([]); });"
    findings, tests = analyse("a.test.js", text)
    assert tests == 1
    assert [f.rule for f in findings] == []

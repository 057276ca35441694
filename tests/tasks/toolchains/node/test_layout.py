"""node-jest layout: sources, tests, mapping, kinds and new test paths (pure functions)."""

from __future__ import annotations

import pytest

from tasks.toolchains.node.layout import (
    Convention,
    NodeKind,
    expected_test,
    find_tests,
    is_source_file,
    is_test_file,
    map_files,
    project_convention,
    source_kind,
)


@pytest.mark.parametrize(
    "path",
    [
        "src/foo.test.ts",
        "src/foo.spec.js",
        "src/__tests__/foo.ts",
        "src/__tests__/foo.test.tsx",
        "test/foo.spec.js",
        "lib/foo.test.mjs",
        "lib/foo.test.cjs",
        "__tests__/deep/bar.jsx",
    ],
)
def test_test_files(path: str) -> None:
    assert is_test_file(path)
    assert not is_source_file(path)


@pytest.mark.parametrize(
    "path",
    [
        "node_modules/x/foo.test.js",
        "dist/foo.test.js",
        "src/foo.ts",
        "src/foo.d.ts",
        "src/__mocks__/foo.ts",
        "README.md",
    ],
)
def test_not_test_files(path: str) -> None:
    assert not is_test_file(path)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/foo.ts", True),
        ("src/foo.tsx", True),
        ("lib/foo.mjs", True),
        ("lib/foo.cjs", True),
        ("index.js", True),
        ("src/types.d.ts", False),
        ("jest.config.ts", False),
        ("vite.config.mjs", False),
        ("babel.config.js", False),
        (".eslintrc.js", False),
        ("src/setupTests.ts", False),
        ("test/helpers.ts", False),
        ("src/__mocks__/api.ts", False),
        ("node_modules/a/index.js", False),
        ("dist/index.js", False),
        ("scripts/release.js", False),
        ("src/foo.py", False),
    ],
)
def test_source_files(path: str, expected: bool) -> None:
    assert is_source_file(path) is expected


def test_src_layout_keeps_only_src() -> None:
    assert is_source_file("src/a.ts", src_layout=True)
    assert not is_source_file("tools/gen.ts", src_layout=True)


TESTS = [
    "src/foo.test.ts",
    "src/__tests__/foo.test.ts",
    "test/foo.spec.js",
    "test/a/bar.spec.ts",
    "test/bar.spec.ts",
    "src/orders.test.ts",
    "src/__tests__/other.test.ts",
]


@pytest.mark.parametrize(
    ("source", "tests"),
    [
        ("src/foo.ts", ["src/__tests__/foo.test.ts", "src/foo.test.ts", "test/foo.spec.js"]),
        ("src/a/bar.ts", ["test/a/bar.spec.ts", "test/bar.spec.ts"]),
        ("src/orders/index.ts", ["src/orders.test.ts"]),
        ("src/missing.ts", []),
        ("lib/other.js", []),
    ],
)
def test_tests_for(source: str, tests: list[str]) -> None:
    assert find_tests(source, TESTS) == tests


def test_a_test_elsewhere_with_the_same_name_does_not_count() -> None:
    assert find_tests("src/a/foo.ts", ["src/b/foo.test.ts"]) == []
    assert find_tests("src/money.util.ts", ["src/money.test.ts"]) == []
    assert find_tests("src/money.util.ts", ["src/money.util.test.ts"]) == ["src/money.util.test.ts"]


@pytest.mark.parametrize(
    ("tests", "convention"),
    [
        ([], Convention("beside", "test", "test")),
        (["src/a.test.ts", "src/b.test.ts", "test/c.spec.ts"], Convention("beside", "test")),
        (["src/__tests__/a.test.ts", "src/__tests__/b.spec.ts"], Convention("dunder", "test")),
        (["test/a.spec.js", "test/b/c.spec.js"], Convention("root", "spec", "test")),
        (["tests/a.test.js"], Convention("root", "test", "tests")),
    ],
)
def test_convention(tests: list[str], convention: Convention) -> None:
    assert project_convention(tests) == convention


@pytest.mark.parametrize(
    ("source", "convention", "expected"),
    [
        ("src/foo.ts", Convention(), "src/foo.test.ts"),
        ("src/ui/Button.tsx", Convention(), "src/ui/Button.test.tsx"),
        ("src/foo.ts", Convention("dunder"), "src/__tests__/foo.test.ts"),
        ("src/a/foo.js", Convention("root", "spec", "test"), "test/a/foo.spec.js"),
        ("lib/foo.mjs", Convention("root", "test", "tests"), "tests/foo.test.mjs"),
        ("src/money.util.ts", Convention(), "src/money.util.test.ts"),
    ],
)
def test_expected_test(source: str, convention: Convention, expected: str) -> None:
    assert expected_test(source, convention) == expected


@pytest.mark.parametrize(
    ("path", "text", "kind"),
    [
        ("src/Button.tsx", "export function Button() { return <button/>; }", NodeKind.COMPONENT),
        ("src/App.jsx", "export default App;", NodeKind.COMPONENT),
        ("src/components/badge.ts", "export function badge() {}", NodeKind.COMPONENT),
        ("src/hooks.tsx", "export function useThing() { return 1; }", NodeKind.MODULE),
        ("src/routes/users.js", "", NodeKind.ROUTE),
        ("src/app.js", "const router = express.Router();", NodeKind.ROUTE),
        ("src/api.ts", "fastify.get('/x', async () => 1)", NodeKind.ROUTE),
        ("src/h.ts", "export function list(req: Request, res: Response) {}", NodeKind.ROUTE),
        ("src/utils/strings.ts", "", NodeKind.UTILITY),
        ("src/dateUtils.ts", "", NodeKind.UTILITY),
        ("src/utilization.ts", "", NodeKind.MODULE),
        ("src/date-utils.ts", "", NodeKind.UTILITY),
        ("src/helpers.js", "", NodeKind.UTILITY),
        ("src/orders.ts", "export class OrderBook {}", NodeKind.MODULE),
    ],
)
def test_kinds(path: str, text: str, kind: NodeKind) -> None:
    assert source_kind(path, text) is kind


def test_map_files_on_a_project() -> None:
    files = [
        "package.json",
        "jest.config.js",
        "src/orders.ts",
        "src/orders.test.ts",
        "src/util/money.ts",
        "src/util/money.test.ts",
        "src/components/summary.ts",
        "src/types.d.ts",
        "scripts/build.js",
        "src/stray.test.ts",
    ]
    texts = {"src/orders.ts": "export class OrderBook {}"}
    mapping = map_files(files, texts.get)
    by = {m.source: m for m in mapping.files}
    assert sorted(by) == ["src/components/summary.ts", "src/orders.ts", "src/util/money.ts"]
    assert by["src/orders.ts"].tests == ["src/orders.test.ts"]
    assert by["src/util/money.ts"].kind is NodeKind.UTILITY
    assert by["src/components/summary.ts"].expected_test == "src/components/summary.test.ts"
    assert mapping.untested == ["src/components/summary.ts"]
    assert mapping.warnings == [
        "src/stray.test.ts: a test file no source matches by name or import (its tests still "
        "run with the suite)"
    ]


def test_map_files_survives_unreadable_files() -> None:
    def boom(path: str) -> str:
        raise OSError("gone")

    mapping = map_files(["src/a.ts"], boom)
    assert [m.kind for m in mapping.files] == [NodeKind.MODULE]


def test_feature_named_tests_map_to_what_they_import() -> None:
    files = [
        "src/index.ts",
        "src/storage.ts",
        "src/decorators/index.ts",
        "src/decorators/expose.ts",
        "src/esm.ts",
        "src/legacy.js",
        "test/functional/circular.spec.ts",
        "test/functional/expose.spec.ts",
        "test/storage.spec.ts",
    ]
    texts = {
        "test/functional/circular.spec.ts": (
            "import 'reflect-metadata';\n"
            "import { defaultMetadataStorage } from '../../src/storage';\n"
            'import { plainToInstance } from "../../src";\n'
            "const { x } = require('../../src/legacy');\n"
            "const later = () => import('../../src/esm.js');\n"
            "import { Outside } from '../../../elsewhere';\n"
        ),
        "test/functional/expose.spec.ts": "import { Expose } from '../../src/decorators';\n",
        "test/storage.spec.ts": "import { Other } from '../src/decorators/expose';\n",
    }
    mapping = map_files(files, texts.get)
    tests = {m.source: m.tests for m in mapping.files}
    assert tests == {
        "src/decorators/expose.ts": [],
        "src/decorators/index.ts": ["test/functional/expose.spec.ts"],
        "src/esm.ts": ["test/functional/circular.spec.ts"],
        "src/index.ts": ["test/functional/circular.spec.ts"],
        "src/legacy.js": ["test/functional/circular.spec.ts"],
        # storage.spec.ts is named after storage.ts: its import of decorators/expose does not
        # count; the feature-named test's import of storage does.
        "src/storage.ts": ["test/storage.spec.ts", "test/functional/circular.spec.ts"],
    }
    assert mapping.warnings == []

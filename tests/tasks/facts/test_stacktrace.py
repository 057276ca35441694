"""Stack trace locations: every supported form, innermost last, repo-relative."""

from __future__ import annotations

from pathlib import Path

from tasks.facts.stacktrace import PathNormaliser, locations_from_trace


def pairs(trace: str, repo: Path | None = None) -> list[tuple[str, int]]:
    return [(loc.path, loc.line) for loc in locations_from_trace(trace, repo)]


def test_ruby_backtrace_is_reversed_and_made_relative(tmp_path: Path) -> None:
    trace = (
        f"{tmp_path}/lib/calc.rb:6:in `/'\n"
        f"{tmp_path}/lib/calc.rb:6:in `div'\n"
        f"{tmp_path}/spec/calc_spec.rb:13:in `block (2 levels) in <top (required)>'\n"
        "/usr/lib/ruby/gems/rspec-core/lib/rspec/core/example.rb:263:in `instance_exec'\n"
    )
    assert pairs(trace, tmp_path) == [
        ("/usr/lib/ruby/gems/rspec-core/lib/rspec/core/example.rb", 263),
        ("spec/calc_spec.rb", 13),
        ("lib/calc.rb", 6),  # the two calc.rb:6 frames are one location
    ]


def test_rspec_formatted_and_ruby34_frames() -> None:
    trace = (
        "# ./spec/models/user_spec.rb:12:in `block (3 levels) in <top (required)>'\n"
        "from ./app/models/user.rb:4:in 'User#name'\n"
        "<internal:kernel>:90:in `tap'\n"
    )
    assert pairs(trace) == [("app/models/user.rb", 4), ("spec/models/user_spec.rb", 12)]


def test_pytest_long_repr_keeps_order() -> None:
    trace = (
        "def test_div():\n>       helper(0)\n\ntests/test_s.py:9: \n_ _ _ _\n\n"
        "    def helper(x):\n>       return 1 / x\nE       ZeroDivisionError: division by zero\n\n"
        "src/pkg/calc.py:3: ZeroDivisionError"
    )
    assert pairs(trace) == [("tests/test_s.py", 9), ("src/pkg/calc.py", 3)]


def test_python_traceback_skips_frozen_frames(tmp_path: Path) -> None:
    trace = (
        "Traceback (most recent call last):\n"
        f'  File "{tmp_path}/app/main.py", line 10, in <module>\n    run()\n'
        '  File "<frozen importlib._bootstrap>", line 1, in _load\n'
        '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads\n'
        "ValueError: bad\n"
    )
    assert pairs(trace, tmp_path) == [
        ("app/main.py", 10),
        ("/usr/lib/python3.11/json/__init__.py", 346),
    ]


def test_java_frames_use_package_path_and_are_reversed() -> None:
    trace = (
        "java.lang.AssertionError: expected:<1> but was:<2>\n"
        "\tat org.junit.Assert.fail(Assert.java:89)\n"
        "\tat com.example.shop.CartTest.total(CartTest.java:31)\n"
        "\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)\n"
        "\tat app//org.acme.Calc$Inner.lambda$run$0(Calc.kt:7)\n"
        "\tat Main.main(Main.java:3)\n"
    )
    assert pairs(trace) == [
        ("Main.java", 3),
        ("org/acme/Calc.kt", 7),
        ("com/example/shop/CartTest.java", 31),
        ("org/junit/Assert.java", 89),
    ]


def test_js_frames_named_and_anonymous(tmp_path: Path) -> None:
    trace = (
        "Error: expect(received).toBe(expected)\n"
        f"    at Object.toBe ({tmp_path}/src/cart.test.js:12:25)\n"
        "    at new Promise (<anonymous>)\n"
        f"    at file://{tmp_path}/src/util.mjs:4:9\n"
        "    at node:internal/process/task_queues:95:5\n"
        "    at async Promise.all (index 0)\n"
    )
    assert pairs(trace, tmp_path) == [("src/util.mjs", 4), ("src/cart.test.js", 12)]


def test_mixed_orientations_are_each_normalised() -> None:
    trace = (
        "./spec/a_spec.rb:5:in `x'\n./spec/helper.rb:2:in `y'\n"
        'File "t/a.py", line 1, in f\nFile "t/b.py", line 2, in g\n'
    )
    assert pairs(trace) == [
        ("spec/helper.rb", 2),
        ("spec/a_spec.rb", 5),
        ("t/a.py", 1),
        ("t/b.py", 2),
    ]


def test_non_frames_are_ignored() -> None:
    trace = (
        "expected: 4\n     got: 3\nFailure/Error: expect(x).to eq(4)\n"
        "at 12:30:45 the server said: no\nhttp://example.test:80/path\nline 0:0: x\n"
    )
    assert pairs(trace) == []


def test_symlinked_repo_paths_become_relative(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "lib").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    norm = PathNormaliser(link)
    assert norm(f"{real}/lib/x.rb") == "lib/x.rb"
    assert norm(f"{link}/lib/x.rb") == "lib/x.rb"
    assert norm(f"{tmp_path}/other/x.rb") == f"{tmp_path}/other/x.rb"
    assert norm(f"{real}x/lib/x.rb") == f"{real}x/lib/x.rb"  # a sibling with a common prefix

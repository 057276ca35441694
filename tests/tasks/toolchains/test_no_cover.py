"""The lines a project marks as reachable by no test, as each stack reads its own markers."""

from __future__ import annotations

from tasks.toolchains.registry import get_toolchain

PY = """\
def f(x):
    if x:  # pragma: no cover
        raise SystemExit(1)

        return 0
    return 2


def g():  # Pragma: No Cover
    return 3
x = 1
y = 2  # pragma: no cover
"""

RB = """\
class A
  # :nocov:
  def debug
    puts 1
  end
  # :nocov:
  def real
    2
  end
  # :nocov:
  def tail; end
end
"""


def test_python_marks_the_line_and_the_block_it_opens() -> None:
    assert get_toolchain("python-pytest").no_cover_lines(PY) == {2, 3, 4, 5, 9, 10, 12}


def test_ruby_marks_the_lines_between_nocov_pairs_and_an_unclosed_tail() -> None:
    assert get_toolchain("ruby-rspec").no_cover_lines(RB) == {2, 3, 4, 5, 6, 10, 11, 12}


def test_a_marker_inside_a_string_or_code_is_not_a_ruby_marker() -> None:
    text = 'x = "# :nocov:"\ny = 1 # :nocov:\n'
    assert get_toolchain("ruby-rspec").no_cover_lines(text) == set()

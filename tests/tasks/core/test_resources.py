"""tasks/core/resources.py: every shipped data file is found by its repository path; anything else
is refused with one clear line. (tests/test_wheel.py checks the same from an installed wheel.)"""

from __future__ import annotations

import pytest

from tasks.core.resources import ResourceError, resource_path
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize(
    "name",
    [
        "prompts",
        "prompts/generate.md.j2",
        "skills/rails-model.md",
        "judge/rubric.md",
        "judge/calibration",
        "tasks/toolchains/ruby/resources/autopilot_simplecov.rb",
    ],
)
def test_checkout_resources_are_the_repository_files(name: str) -> None:
    assert resource_path(name) == REPO_ROOT / name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../etc/passwd", "not a resource path"),
        ("prompts/../../etc/passwd", "not a resource path"),
        ("", "not a resource path"),
        ("examples/rails_shop", "not one of Autopilot's resources"),
        ("prompts/no-such.md.j2", "missing from this installation"),
        ("judge/no-such.md", "missing from this installation"),
    ],
)
def test_other_paths_are_refused(name: str, message: str) -> None:
    with pytest.raises(ResourceError, match=message):
        resource_path(name)

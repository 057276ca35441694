"""The installed product: a wheel built from the checkout, installed into a clean venv outside
it (the lock file's versions as constraints), runs `parse`, `map` and `audit` on an example and
finds every prompt, skill, the rubric, the calibration cases and the toolchains' resources in
its own site-packages, never in the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.examples_repo import make_example_repo

pytestmark = pytest.mark.slow

REPORT = REPO_ROOT / "tests" / "fixtures" / "reports" / "surefire.xml"


def uv_command() -> list[str]:
    """uv as scripts/setup.sh installs it: on PATH, or a module of the base interpreter."""
    found = shutil.which("uv")
    if found:
        return [found]
    for python in (shutil.which("python3.11"), shutil.which("python3"), sys._base_executable):
        if (
            python
            and subprocess.run([python, "-m", "uv", "--version"], capture_output=True).returncode
            == 0
        ):
            return [python, "-m", "uv"]
    pytest.skip("uv not installed")


def run(argv: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=900, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv outside the checkout with the wheel installed; yields its bin directory."""
    uv = uv_command()
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    run([*uv, "build", "--wheel", "--out-dir", str(dist)], cwd=REPO_ROOT)
    [wheel] = dist.glob("test_autopilot-*.whl")
    pins = work / "constraints.txt"
    run(
        [
            *uv,
            "export",
            "--frozen",
            "--no-dev",
            "--no-emit-project",
            "--no-hashes",
            "-o",
            str(pins),
        ],
        cwd=REPO_ROOT,
    )
    venv = work / "venv"
    # The interpreter the checkout's venv was made from, not the venv itself.
    run([*uv, "venv", "--python", sys._base_executable, str(venv)], cwd=work)
    run(
        [
            *uv,
            "pip",
            "install",
            "--python",
            str(venv / "bin" / "python"),
            "-c",
            str(pins),
            str(wheel),
        ],
        cwd=work,
    )
    yield venv / "bin"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that would point back at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def test_resources_come_from_the_installed_package(installed: Path, tmp_path: Path) -> None:
    code = (
        "import json, tasks, judge\n"
        "from tasks.model.prompts import default_prompts_dir, validate_all\n"
        "from tasks.generate.skills import default_skills_dir, load_skills\n"
        "from judge.rubric import load_rubric, default_rubric_path\n"
        "from judge.calibration import load_cases\n"
        "from tasks.core.resources import resource_path\n"
        "validate_all()\n"
        "print(json.dumps({'tasks': tasks.__file__, 'prompts': str(default_prompts_dir()),\n"
        " 'skills': str(default_skills_dir()), 'n_skills': len(load_skills()),\n"
        " 'rubric': str(default_rubric_path()), 'levels': len(load_rubric().levels),\n"
        " 'cases': len(load_cases()),\n"
        " 'helper': str(resource_path("
        "'tasks/toolchains/ruby/resources/autopilot_simplecov.rb')),\n"
        " 'node_lock': str(resource_path('toolchains/node/package-lock.json'))}))\n"
    )
    done = run([str(installed / "python"), "-c", code], cwd=tmp_path, env=clean_env())
    found = json.loads(done.stdout)
    site = installed.parent
    for key in ("tasks", "prompts", "skills", "rubric", "helper", "node_lock"):
        assert Path(found[key]).is_relative_to(site), (key, found[key])
        assert not Path(found[key]).is_relative_to(REPO_ROOT), (key, found[key])
    assert found["prompts"].endswith("tasks/_data/prompts")
    assert found["n_skills"] == len(list((REPO_ROOT / "skills").glob("*-*.md")))
    assert found["levels"] == 6
    assert found["cases"] == len(list((REPO_ROOT / "judge" / "calibration").glob("*.yaml")))


def test_installed_cli_parses_maps_and_audits(
    installed: Path, tmp_path: Path, prefect_harness: None
) -> None:
    from prefect.settings import PREFECT_API_URL

    autopilot = str(installed / "autopilot")
    env = clean_env(PREFECT_API_URL=str(PREFECT_API_URL.value()))
    parsed = run([autopilot, "parse", str(REPORT), "--json"], cwd=tmp_path, env=env)
    assert json.loads(parsed.stdout)["summary"]["tests"] == 5, parsed.stdout[:500]

    repo = make_example_repo("rails_shop", tmp_path / "shop")
    mapped = json.loads(
        run([autopilot, "map", "--repo", str(repo), "--json"], cwd=tmp_path, env=env).stdout
    )
    assert mapped["toolchain"] == "ruby-rspec"
    assert any(f["source"] == "app/models/product.rb" for f in mapped["files"])

    audited = json.loads(
        run([autopilot, "audit", "--repo", str(repo), "--json"], cwd=tmp_path, env=env).stdout
    )
    assert audited["toolchain"] == "ruby-rspec"
    assert audited["summary"]["specs_passing"] > 0
    # Coverage needs the SimpleCov helper and lint the RuboCop config, both shipped resources.
    assert audited["summary"]["line_coverage"] is not None
    product = next(f for f in audited["files"] if f["source"] == "app/models/product.rb")
    assert product["coverage"] is not None and product["lint_offenses"] is not None

"""Test helper: small repositories that reproduce what real projects do (field cases), and
project virtualenvs built offline from Autopilot's own installed distributions.

A project venv is :func:`tasks.toolchains.python.env.linked_environment` (a real virtualenv whose
site-packages links pytest, coverage, pytest-cov, pytest-benchmark... from this installation);
an editable install of the user's checkout is written the way installers write one.
"""

from __future__ import annotations

from pathlib import Path

from tasks.toolchains.python.env import linked_environment
from tests.examples_repo import git

#: What a typical project's dev environment has.
PROJECT_TOOLS = ("pytest", "coverage", "pytest-cov", "pytest-benchmark")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (relative path -> text) under `root`."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def make_repo(root: Path, files: dict[str, str], message: str = "project") -> Path:
    """A git repository at `root` holding `files`, committed on ``main``."""
    root.mkdir(parents=True, exist_ok=True)
    write_tree(root, files)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return root.resolve()


def project_venv(where: Path, tools: tuple[str, ...] = PROJECT_TOOLS) -> Path:
    """A virtualenv with `tools` (and their requirements); returns its ``bin/python``."""
    return linked_environment(where, tools)


def site_packages(python: Path) -> Path:
    """The site-packages directory of the virtualenv `python` belongs to."""
    (found,) = (python.parent.parent / "lib").glob("python3.*/site-packages")
    return found


def editable_install(python: Path, name: str, checkout_src: Path, style: str) -> None:
    """Install `name` in editable mode from `checkout_src`, as installers write it.

    Styles: ``pth`` (a path line, what hatchling and setuptools' static mode write),
    ``finder`` (setuptools' meta path finder with a name -> directory MAPPING, appended to
    ``sys.meta_path``), ``egg`` (old setuptools' easy-install.pth, which inserts the checkout
    at the very front of ``sys.path``).
    """
    site = site_packages(python)
    if style == "pth":
        (site / f"_{name}.pth").write_text(f"{checkout_src}\n")
    elif style == "finder":
        finder = f"__editable___{name}_1_0_finder"
        (site / f"{finder}.py").write_text(_FINDER.format(name=name, path=checkout_src / name))
        (site / f"__editable__.{name}-1.0.pth").write_text(f"import {finder}; {finder}.install()\n")
    elif style == "egg":
        (site / "easy-install.pth").write_text(
            f"import sys; sys.__plen = len(sys.path)\n{checkout_src}\n"
            "import sys; new = sys.path[sys.__plen:]; del sys.path[sys.__plen:]; "
            "p = getattr(sys, '__egginsert', 0); sys.path[p:p] = new; "
            "sys.__egginsert = p + len(new)\n"
        )
    else:
        raise ValueError(style)


# setuptools' editable finder, reduced to what decides where the package comes from.
_FINDER = """\
import importlib.util
import sys
from importlib.machinery import PathFinder

MAPPING = {{{name!r}: {path!r}}}


class _EditableFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(
                fullname, MAPPING[fullname] + "/__init__.py",
                submodule_search_locations=[MAPPING[fullname]],
            )
        return None


def install():
    if not any(finder == _EditableFinder for finder in sys.meta_path):
        sys.meta_path.append(_EditableFinder)
"""

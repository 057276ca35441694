"""The project itself in its prepared environment, as its maintainers' editable install has it:
its metadata (name, version, entry points) installed, its code left to the worktree.

The project is built by its own build backend (a wheel, in the install sandbox, from the
private copy of the project) and installed without dependencies; then the importable files
the wheel put in site-packages are removed again, keeping the ``.dist-info`` (so
``importlib.metadata.version()`` and entry points work) and the console scripts. The
worktree's code is what every import finds: its package roots come first on the path of
every run (``PYTHONPATH``, the working directory, Autopilot's pytest plugin), as an editable
install points at the checkout, but the environment names no worktree's path, so every
worktree that shares it imports its own code.

A version computed from git at build time (setuptools-scm, hatch-vcs, pdm's scm source) is
the one the worktree's commit gives (:func:`tasks.toolchains.python.project.scm_version`,
passed to the backend as its "pretend" version, since the copy has no git history); it is
part of the environment's key, so another commit's version is another environment. A version
read from a file (``[tool.hatch.version] path``, setuptools' ``version = {attr/file}``, flit's
module) keys the environment by the version the file spells (else by the file's digest).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from tasks.toolchains.python.project import scm_version
from tasks.toolchains.python.requirements import pyproject

#: Build requirements that compute the version from git.
_VCS_BUILDERS = re.compile(
    r"^(setuptools[-_]scm|hatch[-_]vcs|flit[-_]scm|setuptools[-_]git[-_]"
    r"versioning|versioningit|poetry[-_]dynamic[-_]versioning)\b",
    re.IGNORECASE,
)
#: A version assigned plainly in a module (``__version__ = "1.2"``, hatch's default pattern).
_VERSION_LINE = re.compile(
    r"^(?:__version__|VERSION)\s*(?::\s*str\s*)?=\s*(?P<q>['\"])(?P<version>[^'\"]+)(?P=q)",
    re.MULTILINE,
)
#: Build files whose content decides what the project's metadata says.
BUILD_FILES = ("pyproject.toml", "setup.cfg", "setup.py")


def installable(project: Path) -> bool:
    """Whether the project can be built and installed (a build configuration exists)."""
    data = pyproject(project)
    return bool(data.get("build-system") or data.get("project")) or any(
        (project / n).is_file() for n in ("setup.py", "setup.cfg")
    )


def _dynamic_version(data: dict[str, Any]) -> bool:
    meta = data.get("project")
    if not isinstance(meta, dict):
        return True  # setup.py or setup.cfg: the build decides
    dynamic = meta.get("dynamic")
    return isinstance(dynamic, list) and "version" in dynamic


def vcs_version(project: Path) -> str | None:
    """The version git gives the worktree's commit, when the build computes it from git."""
    data = pyproject(project)
    system = data.get("build-system")
    requires = system.get("requires", []) if isinstance(system, dict) else []
    tool = _table(data, "tool")
    declared = (
        "setuptools_scm" in tool
        or _table(tool, "hatch", "version").get("source") == "vcs"
        or _table(tool, "pdm", "version").get("source") == "scm"
        or any(isinstance(r, str) and _VCS_BUILDERS.match(r.strip()) for r in requires)
    )
    return scm_version(project)[0] if declared and _dynamic_version(data) else None


def _table(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    for key in keys:
        found = data.get(key)
        data = found if isinstance(found, dict) else {}
    return data


def version_file(project: Path) -> Path | None:
    """The file a dynamic version is read from (hatch's ``path``, setuptools' ``attr`` or
    ``file``, flit's module), when the project names one inside itself."""
    data = pyproject(project)
    tool = _table(data, "tool")
    hatch = _table(tool, "hatch", "version")
    declared = _table(tool, "setuptools", "dynamic").get("version")
    candidates: list[str] = []
    backend = _table(data, "build-system").get("build-backend")
    if isinstance(backend, str) and backend.startswith("flit_core") and _dynamic_version(data):
        # flit reads `__version__` from the module it builds.
        name = _table(tool, "flit", "module").get("name") or _table(data, "project").get("name")
        declared = {"attr": f"{str(name).replace('-', '_')}.__version__"} if name else declared
    if isinstance(hatch.get("path"), str):
        candidates.append(hatch["path"])
    if isinstance(declared, dict) and isinstance(declared.get("file"), str):
        candidates.append(declared["file"])
    if isinstance(declared, dict) and isinstance(declared.get("attr"), str):
        module = declared["attr"].rsplit(".", 1)[0].replace(".", "/")
        candidates += [
            f"{base}{module}{end}" for base in ("src/", "") for end in (".py", "/__init__.py")
        ]
    root = project.resolve()
    for rel in candidates:
        path = (root / rel).resolve()
        if path.is_relative_to(root) and path.is_file():
            return path
    return None


def key_values(project: Path) -> dict[str, str]:
    """What besides the build files decides the installed metadata: the version from git,
    or the digest of the file the version is read from."""
    if not installable(project):
        return {}
    version = vcs_version(project)
    if version is not None:
        return {"(project version from git)": version}
    found = version_file(project)
    if found is None:
        return {}
    rel = found.relative_to(project.resolve()).as_posix()
    text = found.read_text(encoding="utf-8", errors="replace")
    # The version itself when the file spells it plainly (an edit elsewhere in a package's
    # __init__ is no new environment), else the whole file's digest.
    plain = _VERSION_LINE.search(text) if found.suffix == ".py" else None
    if plain is not None:
        return {f"(project version in {rel})": plain.group("version")}
    return {rel: hashlib.sha256(text.encode()).hexdigest()}


def build_env(project: Path) -> dict[str, str]:
    """The variables that give a git-versioned build the worktree's version."""
    version = vcs_version(project)
    if version is None:
        return {}
    return {
        "SETUPTOOLS_SCM_PRETEND_VERSION": version,
        "PDM_BUILD_SCM_VERSION": version,
        "POETRY_DYNAMIC_VERSIONING_BYPASS": version,
    }


#: A script run with the environment's interpreter, in the install sandbox: removes the
#: importable files of the distribution installed from the directory ``argv[1]`` (the
#: project's copy), keeps its metadata and scripts, and prints ``name version``.
STRIP = r"""
import json, os, shutil, sys, sysconfig
from importlib.metadata import distributions
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlparse
source = os.path.realpath(sys.argv[1])
site = Path(sysconfig.get_paths()["purelib"])
for dist in distributions(path=[str(site)]):
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if not url.startswith("file:") or os.path.realpath(unquote(urlparse(url).path)) != source:
        continue
    dirs = set()
    for name in dist.files or []:
        parts = PurePosixPath(str(name)).parts
        top = parts[0] if parts else ".."
        meta = top.endswith((".dist-info", ".data")) or (len(parts) == 1 and top.endswith(".pth"))
        if top == ".." or meta:
            continue
        path = site.joinpath(*parts)
        if path.is_file() or path.is_symlink():
            path.unlink()
        dirs.update(path.parents)
    inside = [d for d in dirs if site in d.parents]
    for folder in sorted(inside, key=lambda d: -len(d.parts)):
        shutil.rmtree(folder / "__pycache__", ignore_errors=True)
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    print(dist.metadata["Name"], dist.version)
"""

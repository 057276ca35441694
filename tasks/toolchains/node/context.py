"""The prompt context of a JavaScript/TypeScript source: the files a model needs beside it
(what it imports, the project's TypeScript and Jest set-up) and the versions that decide which
APIs a test may use (the project's declared ones, else the tools Autopilot runs with)."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any

from tasks.toolchains.node.imports import relative_imports, resolve
from tasks.toolchains.node.jest import CONFIG_FILES

#: Set-up files a test may depend on, in order of use to a model.
SETUP_FILES = ("tsconfig.json", *CONFIG_FILES, "jest.setup.ts", "jest.setup.js", "setupTests.ts")
#: Packages whose versions decide a test's APIs.
VERSIONED = (
    "jest",
    "ts-jest",
    "typescript",
    "@types/jest",
    "react",
    "express",
    "fastify",
    "supertest",
    "@testing-library/react",
    "@testing-library/dom",
)
_MAX_IMPORTS = 8


def context_paths(project: Path, source: str, source_text: str) -> list[str]:
    """The sources `source` imports (resolved like Node and TypeScript do), then the set-up
    files that exist."""
    found: list[str] = []
    for spec in relative_imports(source_text):
        base = posixpath.normpath(posixpath.join(posixpath.dirname(source), spec))
        candidates = _candidates(project, base)
        target = resolve(source, spec, candidates)
        if target and target != source:
            found.append(target)
        if len(found) >= _MAX_IMPORTS:
            break
    found += [name for name in SETUP_FILES if (project / name).is_file()]
    return list(dict.fromkeys(found))


def _candidates(project: Path, base: str) -> set[str]:
    """The files near `base` an import of it may name (no listing of the whole project)."""
    directory = project / posixpath.dirname(base)
    names: set[str] = set()
    for folder, prefix in ((directory, posixpath.dirname(base)), (project / base, base)):
        try:
            names |= {posixpath.join(prefix, p.name) for p in folder.iterdir() if p.is_file()}
        except OSError:
            continue
    return {n.removeprefix("./") for n in names}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def node_versions(project: Path, tools_home: Path) -> dict[str, str]:
    """Package -> version: the project's declared ranges, else the versions of Autopilot's
    own tools (which the runs use when the project has none)."""
    package = _read_json(project / "package.json")
    declared: dict[str, str] = {}
    for key in ("dependencies", "devDependencies", "peerDependencies"):
        deps = package.get(key)
        if isinstance(deps, dict):
            declared |= {k: str(v) for k, v in deps.items() if k in VERSIONED}
    ours = _read_json(tools_home / "package.json").get("devDependencies")
    if isinstance(ours, dict):
        for name in ("jest", "ts-jest", "typescript"):
            if name not in declared and name in ours:
                declared[name] = f"{ours[name]} (Autopilot's)"
    engines = package.get("engines")
    if isinstance(engines, dict) and isinstance(engines.get("node"), str):
        declared["node"] = engines["node"]
    return dict(sorted(declared.items()))

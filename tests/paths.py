"""Where the tests' shared files are, wherever a test module sits in the tree."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
EXAMPLES = REPO_ROOT / "examples"

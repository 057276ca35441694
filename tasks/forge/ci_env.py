"""The pull request a CI job runs for, where the CI says so plainly.

- GitHub Actions, on ``pull_request``/``pull_request_target`` events: ``GITHUB_REF`` is
  ``refs/pull/<n>/merge`` (or ``/head``), and the event file at ``GITHUB_EVENT_PATH`` holds
  ``pull_request.number``.
- GitLab CI, in a merge request pipeline: ``CI_MERGE_REQUEST_IID``.

Anything else (a push build, a value that is not a positive number) is no pull request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

_GITHUB_REF = re.compile(r"^refs/pull/([1-9][0-9]{0,9})/(?:merge|head)$")
_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")
#: The most bytes of GitHub's event file read (it is a small JSON document).
MAX_EVENT_BYTES = 5_000_000


def pr_number_from_env(env: Mapping[str, str]) -> int | None:
    """The pull (merge) request number the CI environment `env` names, or None."""
    iid = env.get("CI_MERGE_REQUEST_IID", "").strip()
    if _NUMBER.match(iid):
        return int(iid)
    if env.get("GITHUB_EVENT_NAME") not in ("pull_request", "pull_request_target"):
        return None
    if m := _GITHUB_REF.match(env.get("GITHUB_REF", "").strip()):
        return int(m[1])
    return _event_number(env.get("GITHUB_EVENT_PATH", ""))


def _event_number(path: str) -> int | None:
    if not path:
        return None
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(MAX_EVENT_BYTES))
    except (OSError, ValueError):
        return None
    pull = data.get("pull_request") if isinstance(data, dict) else None
    number = pull.get("number") if isinstance(pull, dict) else None
    return (
        number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
    )

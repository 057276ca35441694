"""CI's results in, the fix out: reports fetched from local paths and ``s3://`` URIs, the
failing commit made present in the worker's clone, the fix branch pushed.

Public: :func:`fetch_reports` (a :class:`FetchedReports`: files and one line per failure),
:func:`ensure_commit` and :func:`ensure_ref` (a commit or ref fetched when the clone lacks it),
:func:`merge_base` (a shallow clone deepened for it), :func:`push_fix_branch`.

May import: boto3 (lazily), pydantic, ``tasks.keep.git``/``tasks.keep.git_safe`` (the hardened git).
Never the sandbox, the model or a flow.
"""

from tasks.ci_inputs.commits import (
    CommitFetch,
    PushOutcome,
    ensure_commit,
    ensure_ref,
    merge_base,
    push_fix_branch,
)
from tasks.ci_inputs.reports import FetchedReport, FetchedReports, fetch_reports

__all__ = [
    "CommitFetch",
    "FetchedReport",
    "FetchedReports",
    "PushOutcome",
    "ensure_commit",
    "ensure_ref",
    "fetch_reports",
    "merge_base",
    "push_fix_branch",
]

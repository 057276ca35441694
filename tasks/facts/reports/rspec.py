"""RSpec JSON reports (``rspec --format json``).

The whole document is loaded with :mod:`json`: the format is one JSON object whose ``examples``
array must be complete before anything is known, and an RSpec run large enough for that to
matter (hundreds of MB) is not a realistic input. Reports are untrusted: every field is checked
for its type, and errors name the example.

Errors outside examples (a spec file that does not even load, a failing ``before(:suite)``)
appear only in the report's ``messages``; each becomes one case with status ``error``, so a
broken spec is never mistaken for an empty passing run.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from tasks.core.errors import ReportError
from tasks.facts.stacktrace import PathNormaliser, trace_pairs

if TYPE_CHECKING:
    from tasks.core.types import TestStatus

Record = dict[str, Any]

_STATUS: dict[str, TestStatus] = {"passed": "passed", "failed": "failed", "pending": "skipped"}
_LOADING = re.compile(r"An error occurred while loading (\S+?)\.?\s*$", re.M)
_ERROR_CLASS = re.compile(r"^([A-Z][\w:]*):\s*$", re.M)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0


def _record(
    *,
    id: str,
    name: str,
    classname: str,
    file: str | None,
    line: int | None,
    status: TestStatus,
    duration: float,
    message: str | None,
    error_type: str | None,
    trace: str | None,
    norm: PathNormaliser,
) -> Record:
    """A record with the fields of TestCaseResult, in its field order."""
    pairs = trace_pairs(trace, norm) if trace else []
    return {
        "id": id,
        "name": name,
        "classname": classname,
        "file": file,
        "line": line,
        "status": status,
        "duration": duration,
        "message": message,
        "error_type": error_type,
        "trace": trace,
        "locations": [{"path": p, "line": n} for p, n in pairs],
        "other_results": [],
        "duplicate_of": None,
        "stdout": None,
        "stderr": None,
    }


def _example(index: int, ex: Any, source: str, norm: PathNormaliser) -> Record:
    if not isinstance(ex, dict):
        raise ReportError(source, f"RSpec example #{index} is not an object")
    raw_status = ex.get("status")
    status = _STATUS.get(raw_status) if isinstance(raw_status, str) else None
    if status is None:
        raise ReportError(source, f"RSpec example #{index} has unknown status {raw_status!r}")
    description = _str(ex.get("description")) or ""
    full = _str(ex.get("full_description")) or description
    raw_file = _str(ex.get("file_path"))
    file = norm(raw_file) if raw_file else None
    line = _int(ex.get("line_number"))
    raw_id = _str(ex.get("id"))
    if raw_id:
        case_id = raw_id[2:] if raw_id.startswith("./") else raw_id
    elif file is not None:
        case_id = f"{file}:{line}" if line is not None else f"{file}::{full}"
    else:
        case_id = full
    classname = full[: -len(description)].strip() if description and full != description else ""
    message = error_type = trace = None
    if status == "skipped":
        message = _str(ex.get("pending_message"))
    exception = ex.get("exception")
    if isinstance(exception, dict) and status != "skipped":
        error_type = _str(exception.get("class"))
        message = (_str(exception.get("message")) or "").strip() or None
        backtrace = exception.get("backtrace")
        if isinstance(backtrace, list):
            trace = "\n".join(x for x in backtrace if isinstance(x, str)) or None
    return _record(
        id=case_id,
        name=full,
        classname=classname,
        file=file,
        line=line,
        status=status,
        duration=_float(ex.get("run_time")),
        message=message,
        error_type=error_type,
        trace=trace,
        norm=norm,
    )


def _outside_error(index: int, text: str, norm: PathNormaliser) -> Record:
    loading = _LOADING.search(text)
    file = norm(loading.group(1)) if loading else None
    error_class = _ERROR_CLASS.search(text)
    message = None
    if error_class:
        # The lines after "SyntaxError:" up to the backtrace ("# ...") are the message.
        rest = text[error_class.end() :].splitlines()
        body = [ln.strip() for ln in rest if ln.strip() and not ln.lstrip().startswith("#")]
        message = body[0] if body else None
    headline = next((ln.strip() for ln in text.splitlines() if ln.strip()), "error")
    return _record(
        id=file if file else f"rspec:error-outside-examples-{index}",
        name=headline,
        classname="",
        file=file,
        line=None,
        status="error",
        duration=0.0,
        message=message or headline,
        error_type=error_class.group(1) if error_class else None,
        trace=text.strip(),
        norm=norm,
    )


def parse_rspec_json(source: str, data: bytes, norm: PathNormaliser) -> list[Record]:
    """Parse an RSpec JSON report into records (dicts with the fields of TestCaseResult).

    Args:
        source: The report's name for error messages.
        data: The file's bytes (UTF-8; invalid bytes become replacement characters).
        norm: The path normaliser for the repository.

    Raises:
        ReportError: when the file is not JSON or not an RSpec report.
    """
    try:
        doc = json.loads(data.decode("utf-8-sig", errors="replace"))
    except json.JSONDecodeError as exc:
        raise ReportError(
            source,
            "not a JUnit XML or RSpec JSON report "
            f"(invalid JSON, line {exc.lineno}, column {exc.colno}: {exc.msg})",
        ) from None
    except RecursionError:
        raise ReportError(source, "JSON nested too deeply to be an RSpec report") from None
    if not isinstance(doc, dict):
        raise ReportError(
            source, f"JSON top level is {type(doc).__name__}, not an RSpec report object"
        )
    examples = doc.get("examples")
    if not isinstance(examples, list):
        raise ReportError(source, 'JSON object has no "examples" list: not an RSpec JSON report')
    cases = [_example(i, ex, source, norm) for i, ex in enumerate(examples, 1)]
    messages = doc.get("messages")
    if isinstance(messages, list):
        for i, text in enumerate(messages, 1):
            if isinstance(text, str) and "An error occurred" in text:
                cases.append(_outside_error(i, text, norm))
    return cases

"""Cases as JSON text, fast: the CLI's ``parse --json`` writes hundreds of thousands of them.

Every function here returns exactly what ``json.dumps`` returns for the case's record without
``stdout``/``stderr`` (the fields TestCaseResult leaves out of its JSON), so the output equals
the typed model's. Instead of encoding a dict and its keys every time, the document is filled
into a template field by field, with the JSON text of durations and classnames remembered
(both repeat across a report); only a case's further results, which few cases have, and a
duration JSON cannot write as a number go through the JSON encoder.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

from tasks.facts.reports.cases import Row, expand

_ENCODE = json.JSONEncoder().encode
_LOCATION = '{"path": %s, "line": %d}'
#: The end of a passing case's document: no message, trace, locations or duplicate.
_PLAIN_TAIL = (
    '"message": null, "error_type": null, "trace": null, "locations": [], '
    '"other_results": [], "duplicate_of": null}'
)
#: Durations as JSON text: a report's durations repeat (milliseconds), writing a float does not.
_DURATIONS: dict[float, str] = {}
#: Classnames as JSON strings: every case of a class repeats its classname.
_CLASSNAMES: dict[str, str] = {}
#: Locations as JSON objects: the same frames recur in the traces of a report.
_LOCATIONS: dict[tuple[str, int], str] = {}
_CACHED = 4096


def _head(
    id_: str, name: str, classname: str, file: str | None, line: int | None, status: str,
    duration: float,
) -> str:  # fmt: skip
    """The document up to and including ``"duration"`` (a finite duration)."""
    duration_text = _DURATIONS.get(duration) if duration else repr(duration)  # -0.0 == 0.0
    if duration_text is None:
        duration_text = repr(duration)
        if len(_DURATIONS) < _CACHED:
            _DURATIONS[duration] = duration_text
    classname_text = _CLASSNAMES.get(classname)
    if classname_text is None:
        classname_text = _quote(classname)
        if len(_CLASSNAMES) < _CACHED:
            _CLASSNAMES[classname] = classname_text
    return (
        f'{{"id": {_quote(id_)}, "name": {_quote(name)}, "classname": {classname_text}, '
        f'"file": {"null" if file is None else _quote(file)}, '
        f'"line": {"null" if line is None else line}, "status": "{status}", '
        f'"duration": {duration_text}, '
    )


def row_json(row: Row) -> str:
    """A :data:`~tasks.facts.reports.cases.Row` as its record's JSON."""
    if not -1e308 < row[5] < 1e308:
        return case_json(expand(row))
    return _head(row[0], row[1], row[2], row[3], row[4], "passed", row[5]) + _PLAIN_TAIL


def case_json(record: dict[str, Any]) -> str:
    """One record as JSON, byte-identical to ``json.dumps`` of it without stdout/stderr."""
    duration = record["duration"]
    if not -1e308 < duration < 1e308 or record["other_results"]:
        return _ENCODE({k: v for k, v in record.items() if k not in ("stdout", "stderr")})
    head = _head(
        record["id"], record["name"], record["classname"], record["file"], record["line"],
        record["status"], duration,
    )  # fmt: skip
    message, error_type, trace = record["message"], record["error_type"], record["trace"]
    duplicate_of = record["duplicate_of"]
    if message is None and trace is None and error_type is None and duplicate_of is None:
        return head + _PLAIN_TAIL
    message_text = "null" if message is None else _quote(message)
    error_type_text = "null" if error_type is None else _quote(error_type)
    trace_text = "null" if trace is None else _quote(trace)
    duplicate_text = "null" if duplicate_of is None else _quote(duplicate_of)
    return (
        f'{head}"message": {message_text}, "error_type": {error_type_text}, '
        f'"trace": {trace_text}, "locations": [{_locations(record["locations"])}], '
        f'"other_results": [], "duplicate_of": {duplicate_text}}}'
    )


def _locations(locations: list[dict[str, Any]]) -> str:
    """The JSON of a list of locations, without its brackets."""
    texts = []
    for location in locations:
        key = (location["path"], location["line"])
        text = _LOCATIONS.get(key)
        if text is None:
            text = _LOCATION % (_quote(key[0]), key[1])
            if len(_LOCATIONS) < _CACHED:
                _LOCATIONS[key] = text
        texts.append(text)
    return ", ".join(texts)


def cases_json(batch: list[dict[str, Any] | Row]) -> str:
    """The JSON of every case of a batch (records and rows), each preceded by ``,\\n``."""
    texts = [""]  # joined: ",\n" before the first case too
    for case in batch:
        texts.append(row_json(case) if isinstance(case, tuple) else case_json(case))
    return ",\n".join(texts)

"""Hostile and broken reports: refused with one clear line, never expanded, never crash."""

from __future__ import annotations

import codecs
import json
import tracemalloc
from pathlib import Path

import pytest

from tasks.core.errors import ReportError
from tasks.core.types import Location, TestCaseResult
from tasks.facts.reports.read import iter_report, parse_report, parse_reports


def reason(path: Path) -> str:
    with pytest.raises(ReportError) as info:
        parse_report(path)
    err = info.value
    assert err.file == str(path)
    assert "\n" not in str(err)
    assert str(err).startswith(f"{path}: ")
    return err.reason


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    lol = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)
    ]
    path = tmp_path / "lol.xml"
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [\n{chr(10).join(lol)}\n]>\n'
        '<testsuite><testcase name="&lol9;"/></testsuite>\n'
    )
    assert "entity" in reason(path)


def test_external_entity_never_reads_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    path = tmp_path / "xxe.xml"
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        '<testsuite><testcase name="x"><failure message="&xxe;">&xxe;</failure>'
        "</testcase></testsuite>\n"
    )
    why = reason(path)
    assert "TOP-SECRET-VALUE" not in why
    run = parse_reports([path])
    assert "TOP-SECRET-VALUE" not in run.model_dump_json()
    assert run.cases == [] and len(run.errors) == 1


def test_external_dtd_and_parameter_entities_are_not_loaded(tmp_path: Path) -> None:
    secret = tmp_path / "evil.dtd"
    secret.write_text('<!ENTITY leak "LEAKED-FROM-DTD">')
    path = tmp_path / "dtd.xml"
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "file://{secret}">\n'
        '<testsuite><testcase name="a"/></testsuite>\n'
    )
    # A DOCTYPE that declares nothing is harmless and its external subset is never fetched.
    (case,) = parse_report(path)
    assert case.name == "a"
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [<!ENTITY % p SYSTEM "file://{secret}"> %p;]>'
        '\n<testsuite><testcase name="&leak;"/></testsuite>\n'
    )
    assert "LEAKED" not in reason(path)


def test_truncated_xml_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text('<testsuite>\n<testcase name="a"/>\n<testcase name="b"')
    why = reason(path)
    assert why.startswith("malformed or truncated JUnit XML (line 3, column")
    assert "unclosed token" in why


def test_non_xml_and_foreign_xml(tmp_path: Path) -> None:
    text = tmp_path / "notes.xml"
    text.write_text("just some log output\nline 2\n")
    assert (
        reason(text) == "not a JUnit XML or RSpec JSON report (starts with 'just some log output')"
    )
    html = tmp_path / "page.xml"
    html.write_text("<html><body>hi</body></html>")
    assert "XML root is <html>" in reason(html)
    broken = tmp_path / "broken.xml"
    broken.write_text("<<<>>>")
    assert reason(broken).startswith("not a JUnit XML or RSpec JSON report (line 1, column")


def test_binary_and_empty_files(tmp_path: Path) -> None:
    binary = tmp_path / "report.xml"
    binary.write_bytes(bytes(range(256)) * 8)
    assert reason(binary) == "not a JUnit XML or RSpec JSON report (binary data)"
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    assert reason(empty).startswith("empty file")
    blank = tmp_path / "blank.xml"
    blank.write_bytes(b"  \n\t\n")
    assert reason(blank).startswith("empty file")
    assert reason(tmp_path) == "is a directory, not a report file"
    assert reason(tmp_path / "nope.xml") == "no such file"


def test_utf16_and_latin1_declared_encodings(tmp_path: Path) -> None:
    doc = (
        '<?xml version="1.0" encoding="{enc}"?>\n<testsuite name="s">'
        '<testcase classname="Caf\u00e9Test" name="cr\u00e8me"><failure message="br\u00fbl\u00e9e">'
        "x</failure></testcase></testsuite>\n"
    )
    utf16 = tmp_path / "u16.xml"
    utf16.write_bytes(codecs.BOM_UTF16_LE + doc.format(enc="UTF-16").encode("utf-16-le"))
    latin = tmp_path / "l1.xml"
    latin.write_bytes(doc.format(enc="ISO-8859-1").encode("latin-1"))
    for path in (utf16, latin):
        (case,) = parse_report(path)
        assert (case.classname, case.name, case.message) == (
            "Caf\u00e9Test",
            "cr\u00e8me",
            "br\u00fbl\u00e9e",
        )
    unknown = tmp_path / "unknown.xml"
    unknown.write_bytes(doc.format(enc="x-no-such-codec").encode("latin-1"))
    assert "line 1" in reason(unknown) or "decode" in reason(unknown)


def test_invalid_utf8_and_control_characters_are_replaced(tmp_path: Path) -> None:
    path = tmp_path / "bad-utf8.xml"
    path.write_bytes(
        b'<?xml version="1.0" encoding="utf-8"?><testsuite>'
        b'<testcase name="ok \xff\xfe bytes"/>'
        b'<testcase name="colour"><failure message="\x1b[31mred\x1b[0m">boom</failure>'
        b"<system-out>\x00nul</system-out></testcase>"
        b'<testcase name="after"/></testsuite>'
    )
    cases = parse_report(path)
    assert [c.name for c in cases] == ["ok \ufffd\ufffd bytes", "colour", "after"]
    assert cases[1].message == "\ufffd[31mred\ufffd[0m"
    assert cases[1].stdout == "\ufffdnul"


def test_deeply_nested_suites_do_not_recurse(tmp_path: Path) -> None:
    depth = 10_000
    path = tmp_path / "deep.xml"
    path.write_text(
        "<testsuites>"
        + '<testsuite name="s">' * depth
        + '<testcase name="bottom" classname="C"><failure message="m">t</failure></testcase>'
        + "</testsuite>" * depth
        + '<testsuite><testcase name="sibling"/></testsuite></testsuites>'
    )
    cases = parse_report(path)
    assert [(c.name, c.status) for c in cases] == [("bottom", "failed"), ("sibling", "passed")]


def test_rspec_json_that_is_not_a_report(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_text("[1, 2, 3]")
    assert reason(array) == "JSON top level is list, not an RSpec report object"
    other = tmp_path / "o.json"
    other.write_text('{"version": "3.12.0"}')
    assert 'no "examples" list' in reason(other)
    truncated = tmp_path / "t.json"
    truncated.write_text('{"examples": [{"id": "./spec/a_spec.rb[1:1]", "status": "pass')
    assert reason(truncated).startswith(
        "not a JUnit XML or RSpec JSON report (invalid JSON, line 1"
    )
    bad_example = tmp_path / "b.json"
    bad_example.write_text(json.dumps({"examples": [{"status": "passed"}, "oops"]}))
    assert reason(bad_example) == "RSpec example #2 is not an object"
    bad_status = tmp_path / "s.json"
    bad_status.write_text(json.dumps({"examples": [{"status": "exploded"}]}))
    assert reason(bad_status) == "RSpec example #1 has unknown status 'exploded'"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "JSON" in reason(deep)


def test_rspec_json_with_invalid_utf8_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(
        b'{"examples": [{"id": "./spec/a_spec.rb[1:1]", "description": "caf\xe9",'
        b' "full_description": "A caf\xe9", "status": "passed", "file_path": "./spec/a_spec.rb",'
        b' "line_number": 3, "run_time": 0.5}]}'
    )
    (case,) = parse_report(path)
    assert (case.id, case.name, case.classname) == ("spec/a_spec.rb[1:1]", "A caf\ufffd", "A")


def write_large(path: Path, cases: int) -> None:
    with path.open("w") as f:
        f.write("<testsuites>")
        for i in range(cases):
            if i % 1000 == 0:
                f.write(("</testsuite>" if i else "") + f'<testsuite name="s{i}">')
            if i % 20 == 0:
                f.write(
                    f'<testcase name="t{i}" classname="pkg.C" time="0.001"><failure message="m{i}">'
                    f'AssertionError: m{i}\n  File "/repo/src/mod.py", line {i % 300 + 1}, in f\n'
                    "</failure></testcase>\n"
                )
            else:
                f.write(f'<testcase name="t{i}" classname="pkg.C" time="0.001"/>\n')
        f.write("</testsuite></testsuites>")


def _peak_while_reading(path: Path) -> tuple[int, int, int, object]:
    """(cases, failed, peak traced bytes, last location) of one streamed read."""
    count = failed = 0
    last_location = None
    tracemalloc.start()
    try:
        for case in iter_report(path, Path("/repo")):
            count += 1
            if case.status == "failed":
                failed += 1
                last_location = case.locations[-1] if case.locations else None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return count, failed, peak, last_location


@pytest.mark.slow
def test_large_report_streams_in_bounded_memory(tmp_path: Path) -> None:
    n = 200_000
    path = tmp_path / "big.xml"
    write_large(path, n)
    size = path.stat().st_size
    count, failed, peak, last_location = _peak_while_reading(path)
    assert (count, failed) == (n, n // 20)
    assert isinstance(last_location, Location) and last_location.path == "src/mod.py"
    # Streaming: what stays is one id hash per case (to number duplicates), under 96 bytes
    # each; an element tree of the file would take several times the file's 12 MB.
    assert peak < 4 * 2**20 + 96 * n, f"peak {peak / 2**20:.1f} MiB for {size / 2**20:.1f} MiB"


@pytest.mark.slow
def test_large_case_output_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "noisy.xml"
    chunk = "log line " * 7000  # 63 kB of captured output per case
    with path.open("w") as f:
        f.write("<testsuite>")
        for i in range(1000):
            f.write(
                f'<testcase name="t{i}"><failure message="m">AssertionError</failure>'
                f"<system-out>{chunk}</system-out></testcase>"
            )
        f.write("</testsuite>")
    count, failed, peak, _ = _peak_while_reading(path)
    assert (count, failed) == (1000, 1000)
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB for a 63 MB file"


def test_entity_from_a_local_external_dtd_is_refused_not_dropped(tmp_path: Path) -> None:
    (tmp_path / "local.dtd").write_text('<!ENTITY company "ACME">')
    path = tmp_path / "r.xml"
    for use in ('<testcase name="a &company; b"/>', '<testcase name="a">&company;</testcase>'):
        path.write_text(
            '<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "local.dtd">\n'
            f"<testsuite>{use}</testsuite>\n"
        )
        assert reason(path) == "entity reference &company; refused (entities are not expanded)"
    # Predefined entities, character references and CDATA are no entity use.
    path.write_text(
        '<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "local.dtd">\n<testsuite>'
        '<testcase name="a &amp; &#65;"><failure><![CDATA[x && &nbsp;]]></failure></testcase>'
        "</testsuite>\n"
    )
    (case,) = parse_report(path)
    assert (case.name, case.message) == ("a & A", "x && &nbsp;")


def test_undeclared_entity_without_dtd_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text('<testsuite><testcase name="x">&nbsp;</testcase></testsuite>')
    assert reason(path).startswith("entity reference refused (line 1")


def _parse_huge_text_report(
    tmp_path: Path, element: str, megabytes: int
) -> tuple[list[TestCaseResult], int]:
    """(cases, peak traced bytes) of a report with one case whose <element> holds
    ``megabytes`` MiB of text (a test that logged without end), then a second case."""
    line = "DEBUG step done " + "y" * 47 + "\n"  # 64 characters
    block = line * (1 << 14)  # 1 MiB
    path = tmp_path / "r.xml"
    with path.open("w") as f:
        f.write(f'<testsuite><testcase name="x"><{element} message="boom">first line\n')
        for _ in range(megabytes):
            f.write(block)
        f.write(f"the last line\n</{element}></testcase><testcase name='y'/></testsuite>")
    tracemalloc.start()
    try:
        cases = parse_report(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return cases, peak


def test_huge_output_keeps_its_tail_in_bounded_memory(tmp_path: Path) -> None:
    """100 MiB of captured output parses; the tail is kept, and memory stays flat."""
    import tasks.facts.reports.junit as junit

    (x, y), peak = _parse_huge_text_report(tmp_path, "system-out", 100)
    assert (x.name, x.status, y.name) == ("x", "passed", "y")
    assert x.stdout is not None and len(x.stdout) == junit.MAX_OUTPUT
    assert x.stdout.endswith("y\nthe last line\n")
    assert peak < 4 * 2**20, f"peak {peak / 2**20:.1f} MiB for 100 MiB of output"


def test_huge_failure_text_keeps_its_head_in_bounded_memory(tmp_path: Path) -> None:
    import tasks.facts.reports.junit as junit

    (x, _), peak = _parse_huge_text_report(tmp_path, "failure", 20)
    assert (x.status, x.message) == ("failed", "boom")
    assert x.trace is not None and x.trace.startswith("first line\nDEBUG step done")
    assert len(x.trace) <= junit.MAX_TRACE
    assert peak < 4 * junit.MAX_TRACE + 4 * 2**20, f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize(
    "huge",
    [
        '<testcase name="{x}"/>',  # an attribute
        "<!-- {x} -->",  # a comment
        "<t{x}/>",  # a tag name
        "<?pi {x}?>",  # a processing instruction
    ],
)
def test_huge_single_tag_or_comment_is_refused_to_bound_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, huge: str
) -> None:
    """expat holds a tag or comment whole: beyond MAX_TOKEN the report is refused, one line."""
    import tasks.facts.reports.junit as junit

    monkeypatch.setattr(junit, "MAX_TOKEN", 1 << 20)
    path = tmp_path / "r.xml"
    path.write_text("<testsuite>" + huge.format(x="y" * (3 << 20)) + "</testsuite>")
    assert reason(path) == ("a single tag or comment is larger than 1 MB (refused to bound memory)")
    # Just below the limit, the same report parses.
    path.write_text('<testsuite><testcase name="' + "y" * (1 << 19) + '"/></testsuite>')
    (case,) = parse_report(path)
    assert len(case.name) == 1 << 19

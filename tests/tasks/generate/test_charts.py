"""tasks/generate/charts.py: the nightly's PNG of coverage and judge score, before and after, by
kind."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from tasks.generate.charts import (
    CHART_KEY,
    DPI,
    HEIGHT_IN,
    WIDTH_IN,
    archive_quality_chart,
    chart_markdown,
    render_quality_chart,
    stats_by_kind,
)
from tasks.keep.archive import open_archive

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

ROWS: list[dict[str, object]] = [
    {
        "source": "app/models/customer.rb",
        "kind": "model",
        "verdict": "accepted",
        "coverage_before": 0.0,
        "coverage_after": 1.0,
        "judge_score": 0.8,
        "static_score": 1.0,
    },
    {
        "source": "app/models/order.rb",
        "kind": "model",
        "verdict": "accepted",
        "coverage_before": 0.5,
        "coverage_after": 0.9,
        "judge_score": 0.6,
        "judge_before": 0.4,
    },
    {
        "source": "app/controllers/orders_controller.rb",
        "kind": "controller",
        "verdict": "rejected",
        "coverage_before": 0.25,
        "coverage_after": None,
        "judge_score": None,
    },
]


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, after checking the signature and the chunk's CRC."""
    assert data[:8] == PNG_MAGIC
    length, ctype = struct.unpack(">I4s", data[8:16])
    assert ctype == b"IHDR" and length == 13
    body = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert zlib.crc32(ctype + body) == crc
    width, height = struct.unpack(">II", body[:8])
    return width, height


def test_png_is_valid_with_the_promised_dimensions_and_an_end_chunk() -> None:
    data = render_quality_chart(ROWS)

    assert png_size(data) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
    assert data.endswith(b"IEND\xaeB`\x82")


def test_stats_group_by_kind_and_keep_only_measured_figures() -> None:
    stats = {s.kind: s for s in stats_by_kind(ROWS)}

    assert sorted(stats) == ["controller", "model"]
    model = stats["model"]
    assert model.files == 2
    assert model.coverage_before == [0.0, 0.5] and model.coverage_after == [1.0, 0.9]
    assert model.judge_after == [0.8, 0.6] and model.judge_before == [0.4]
    assert model.mean(model.coverage_after) == pytest.approx(0.95)
    ctrl = stats["controller"]
    assert ctrl.coverage_after == [] and ctrl.mean(ctrl.coverage_after) is None


def test_table_artifact_rows_with_formatted_cells_give_the_same_figures() -> None:
    table = [
        {"file": "a.rb", "kind": "helper", "coverage before": "40%", "coverage after": "100%"},
        {"file": "b.rb", "kind": "helper", "coverage before": "-", "judge score": "0.70"},
    ]

    [helper] = stats_by_kind(table)

    assert helper.coverage_before == [0.4] and helper.coverage_after == [1.0]
    assert helper.judge_after == [0.7]


def test_different_figures_draw_different_pictures_and_no_rows_still_draw() -> None:
    better = [dict(r, coverage_after=1.0, judge_score=1.0) for r in ROWS]

    assert render_quality_chart(ROWS) != render_quality_chart(better)
    empty = render_quality_chart([])
    assert png_size(empty) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))


def test_chart_is_archived_in_the_manifest_and_linked(tmp_path: Path) -> None:
    run = open_archive(str(tmp_path / "arch")).run("nightly", "run-1")

    uri = archive_quality_chart(run, ROWS)
    manifest = run.finalize()

    assert uri is not None and uri.endswith(f"/run-1/{CHART_KEY}")
    [entry] = [o for o in manifest.objects if o.key == CHART_KEY]
    stored = next(tmp_path.glob(f"arch/nightly/*/run-1/{CHART_KEY}")).read_bytes()
    assert entry.size == len(stored) and stored[:8] == PNG_MAGIC
    assert f"]({uri})" in chart_markdown(uri)
    assert chart_markdown(None) == ""

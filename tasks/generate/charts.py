"""The nightly's quality chart: coverage and judge score before and after, by file kind.

The field report's "by file type" view as a PNG, so operators can see at a glance which kinds
gained and which did not. Rows are the nightly's per-file outcomes (``FileOutcome.public()``
dicts, or the table artifact's rows with their formatted ``"85%"`` / ``"0.74"`` strings).
Matplotlib runs on the Agg backend (no display) and is imported only when a chart is drawn.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasks.keep.archive import RunArchive

log = logging.getLogger(__name__)

# Keys tried in order for each measure: the outcome's field names first, then the table
# artifact's column names, so either row shape draws the same chart.
_COVERAGE_BEFORE = ("coverage_before", "coverage before")
_COVERAGE_AFTER = ("coverage_after", "coverage after")
_JUDGE_BEFORE = ("judge_before", "judge score before", "static_before")
_JUDGE_AFTER = ("judge_score", "judge score", "judge_after")
_KIND = ("kind",)

WIDTH_IN, HEIGHT_IN, DPI = 10.0, 4.5, 100


@dataclass
class KindStats:
    """Mean before/after figures of one file kind (None: no file of the kind had the figure)."""

    kind: str
    files: int = 0
    coverage_before: list[float] = field(default_factory=list)
    coverage_after: list[float] = field(default_factory=list)
    judge_before: list[float] = field(default_factory=list)
    judge_after: list[float] = field(default_factory=list)

    @staticmethod
    def mean(values: list[float]) -> float | None:
        """The mean of `values`, None when empty."""
        return sum(values) / len(values) if values else None


def _number(value: object) -> float | None:
    """A figure from an outcome (float) or a table cell ("85%", "0.74", "-")."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.endswith("%"):
                return float(text[:-1]) / 100.0
            return float(text)
        except ValueError:
            return None  # "-" or anything else: not measured
    return None


def _pick(row: Mapping[str, object], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        if key in row:
            number = _number(row[key])
            if number is not None:
                return number
    return None


def stats_by_kind(rows: Iterable[Mapping[str, object]]) -> list[KindStats]:
    """Group the rows by file kind, keeping each measured figure (sorted by kind).

    Args:
        rows: per-file outcomes; a row without a kind counts as ``"unknown"``.

    Returns:
        One entry per kind present.
    """
    by_kind: dict[str, KindStats] = {}
    for row in rows:
        kind = str(row.get(_KIND[0]) or "unknown")
        stats = by_kind.setdefault(kind, KindStats(kind=kind))
        stats.files += 1
        for keys, bucket in (
            (_COVERAGE_BEFORE, stats.coverage_before),
            (_COVERAGE_AFTER, stats.coverage_after),
            (_JUDGE_BEFORE, stats.judge_before),
            (_JUDGE_AFTER, stats.judge_after),
        ):
            number = _pick(row, keys)
            if number is not None:
                bucket.append(number)
    return [by_kind[k] for k in sorted(by_kind)]


def render_quality_chart(rows: list[dict[str, object]]) -> bytes:
    """A PNG (1000x450 px) of mean coverage and judge score, before and after, by file kind.

    Args:
        rows: the nightly's per-file outcomes (``FileOutcome.public()`` dicts or table rows).

    Returns:
        The PNG bytes. With no rows the chart says so instead of failing.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display on CI workers; must precede pyplot
    from matplotlib.figure import Figure

    stats = stats_by_kind(rows)
    # Figure() rather than pyplot: no global state, safe from several tasks at once.
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    axes = fig.subplots(1, 2)
    labels = [f"{s.kind}\n({s.files})" for s in stats]
    panels = (
        ("Line coverage", "coverage_before", "coverage_after"),
        ("Judge score", "judge_before", "judge_after"),
    )
    for ax, (title, before_attr, after_attr) in zip(axes, panels, strict=True):
        ax.set_title(title)
        ax.set_ylim(0.0, 1.05)
        if not stats:
            ax.text(0.5, 0.5, "no files", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        xs = list(range(len(stats)))
        width = 0.38
        for offset, attr, name, colour in (
            (-width / 2, before_attr, "before", "#9aa5b1"),
            (width / 2, after_attr, "after", "#2f80ed"),
        ):
            means = [KindStats.mean(getattr(s, attr)) for s in stats]
            heights = [m if m is not None else 0.0 for m in means]
            bars = ax.bar([x + offset for x in xs], heights, width, label=name, color=colour)
            for bar, m in zip(bars, means, strict=True):
                text = "n/a" if m is None else f"{m:.2f}"
                ax.annotate(
                    text,
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
        ax.set_xticks(xs, labels)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("Autopilot nightly: before and after, by file kind (files)")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    log.debug("quality chart: %d kinds, %d bytes", len(stats), buffer.tell())
    return buffer.getvalue()


CHART_KEY = "quality-by-kind.png"


def archive_quality_chart(run: RunArchive, rows: list[dict[str, object]]) -> str | None:
    """Render the chart and store it in the run's archive as ``quality-by-kind.png``.

    A chart is a picture for people: failing to draw it is logged and never fails the run.

    Args:
        run: the nightly's open run archive (before ``finalize()``).
        rows: the per-file outcomes (``[o.public() for o in report.files]``).

    Returns:
        The chart's URI (``<run.uri>/quality-by-kind.png``) for the markdown link, or None.
    """
    try:
        data = render_quality_chart(rows)
    except (ValueError, RuntimeError, OSError) as exc:
        log.error("quality chart not drawn: %s", exc)
        return None
    run.put_bytes(CHART_KEY, data)
    return f"{run.uri.rstrip('/')}/{CHART_KEY}"


def chart_markdown(uri: str | None) -> str:
    """The markdown line that links the chart from the nightly's summary artifact."""
    if not uri:
        return ""
    # The image renders when the URI is reachable from the browser; the plain link always works.
    return (
        f"\n## Quality by file kind\n\n![coverage and judge score by kind]({uri})\n\n"
        f"[{uri}]({uri})\n"
    )

"""The trend chart: a PNG of the last runs, for the run's artifact, ``autopilot history
--chart`` and the README.

Four panels, one x position per run (oldest left): the nightly's coverage and judge median;
files accepted (up) and rejected (down) per kind; the repair's autonomous fix rate and human
intervention rate; the estimated cost of each run. Matplotlib on the Agg backend, imported
only when a chart is drawn; a Figure, never pyplot's global state.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from tasks.history.trend import TrendPoint

log = logging.getLogger(__name__)

WIDTH_IN, HEIGHT_IN, DPI = 12.0, 7.5, 100
_KIND_COLOURS = ("#2f80ed", "#27ae60", "#9b51e0", "#f2994a", "#eb5757", "#56ccf2", "#6d4c41")


def render_trend_chart(points: list[TrendPoint], title: str) -> bytes:
    """The PNG (1200x750 px) of `points`; with no run the panels say so."""
    import matplotlib

    matplotlib.use("Agg")  # no display on CI workers; must precede any pyplot import
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    axes = fig.subplots(2, 2)
    xs = list(range(len(points)))
    labels = [p.label for p in points]
    _quality(axes[0][0], points, xs)
    _verdicts(axes[0][1], points, xs)
    _repair(axes[1][0], points, xs)
    _cost(axes[1][1], points, xs)
    for ax in axes.flat:
        ax.set_xticks(xs, labels, fontsize=7)
        ax.set_xlim(-0.6, max(len(points) - 0.4, 0.6))
        if not points:
            ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    log.debug("trend chart: %d runs, %d bytes", len(points), buffer.tell())
    return buffer.getvalue()


def _line(ax: Any, xs: list[int], values: list[float | None], label: str, colour: str) -> None:
    pairs = [(x, v) for x, v in zip(xs, values, strict=True) if v is not None]
    if pairs:
        ax.plot([x for x, _ in pairs], [v for _, v in pairs], "o-", label=label, color=colour)


def _quality(ax: Any, points: list[TrendPoint], xs: list[int]) -> None:
    ax.set_title("Nightly: coverage and judge median", fontsize=10)
    ax.set_ylim(0.0, 1.05)
    nightly = [p.flow == "nightly" for p in points]
    cover = [p.coverage if n else None for p, n in zip(points, nightly, strict=True)]
    judge = [p.judge_median if n else None for p, n in zip(points, nightly, strict=True)]
    _line(ax, xs, cover, "line coverage", "#2f80ed")
    _line(ax, xs, judge, "judge median", "#f2994a")
    if ax.get_lines():
        ax.legend(loc="lower right", fontsize=8)


def _verdicts(ax: Any, points: list[TrendPoint], xs: list[int]) -> None:
    ax.set_title("Nightly: accepted (up) and rejected (down) per kind", fontsize=10)
    kinds = sorted({k for p in points for k in p.by_kind})
    up = [0.0] * len(points)
    down = [0.0] * len(points)
    for i, kind in enumerate(kinds):
        colour = _KIND_COLOURS[i % len(_KIND_COLOURS)]
        acc = [float(p.by_kind.get(kind, {}).get("accepted", 0)) for p in points]
        rej = [-float(p.by_kind.get(kind, {}).get("rejected", 0)) for p in points]
        ax.bar(xs, acc, 0.6, bottom=up, color=colour, label=kind)
        ax.bar(xs, rej, 0.6, bottom=down, color=colour, alpha=0.45)
        up = [a + b for a, b in zip(up, acc, strict=True)]
        down = [a + b for a, b in zip(down, rej, strict=True)]
    ax.axhline(0, color="#555555", linewidth=0.8)
    if kinds:
        ax.legend(loc="upper left", fontsize=8)


def _repair(ax: Any, points: list[TrendPoint], xs: list[int]) -> None:
    ax.set_title("Repair: autonomous fix rate and human intervention rate", fontsize=10)
    ax.set_ylim(0.0, 1.05)
    _line(ax, xs, [p.autonomous_fix_rate for p in points], "autonomous fix rate", "#27ae60")
    _line(ax, xs, [p.human_intervention_rate for p in points], "human intervention", "#eb5757")
    if ax.get_lines():
        ax.legend(loc="upper left", fontsize=8)


def _cost(ax: Any, points: list[TrendPoint], xs: list[int]) -> None:
    ax.set_title("Estimated cost per run (USD, list prices)", fontsize=10)
    colours = ["#2f80ed" if p.flow == "nightly" else "#9b51e0" for p in points]
    costs = [p.cost or 0.0 for p in points]
    bars = ax.bar(xs, costs, 0.6, color=colours)
    for bar, p in zip(bars, points, strict=True):
        text = "n/a" if p.cost is None else f"${p.cost:.3f}"
        ax.annotate(
            text,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=7,
        )
    ax.set_ylim(0.0, max([*costs, 0.001]) * 1.25)

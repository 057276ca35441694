"""Draw docs/cluster.png: a nightly or a repair scaled out on a Dask cluster (docs/operators.md).

Usage: .venv/bin/python scripts/cluster_picture.py [OUT.png]
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

OUT = Path(__file__).resolve().parents[1] / "docs" / "cluster.png"
BOXES = {
    # name: (x, y, width, height, title, lines, colour)
    "prefect": (
        0.2,
        7.2,
        4.2,
        2.2,
        "prefect server",
        [
            "UI and API (runs, task runs, logs, artifacts)",
            "concurrency limit autopilot-model-calls",
            "Secret block with the model key",
        ],
        "#dbe9f6",
    ),
    "flow": (
        5.0,
        7.2,
        4.6,
        2.2,
        "flow process: autopilot nightly / repair --dask",
        [
            "worktree of the commit (on the shared file system)",
            "its environment and services: the baseline",
            "branch, archive manifest, history, artifacts",
        ],
        "#e3f1df",
    ),
    "scheduler": (
        10.2,
        7.6,
        3.6,
        1.4,
        "dask scheduler",
        [
            "tcp://HOST:8786: file jobs and groups",
        ],
        "#fdebd3",
    ),
    "w1": (
        5.0,
        3.4,
        4.2,
        2.8,
        "dask worker 1",
        [
            "a job carries its run: ShippedRun,",
            "settings without secrets (by reference)",
            "the run made once here: environment by key,",
            "its own PostgreSQL/Redis, a database per job",
            "each test run in the sandbox (bwrap or docker)",
        ],
        "#fdebd3",
    ),
    "w2": (
        9.6,
        3.4,
        4.2,
        2.8,
        "dask worker 2",
        [
            "the same; a killed worker's jobs",
            "run again here, replies replayed",
            "from the shared reply store",
            "(no model reply bought twice)",
        ],
        "#fdebd3",
    ),
    "shared": (
        5.0,
        0.3,
        8.8,
        2.2,
        "shared file system, the same path everywhere",
        [
            "TMPDIR: the runs' worktrees      AUTOPILOT_HOME: envs/<stack>-<key>, cache/replies,",
            "cache/nightly (outcomes), archive (or s3://), history.sqlite3 (or PostgreSQL)",
        ],
        "#eeeeee",
    ),
    "model": (
        0.2,
        3.8,
        4.2,
        1.6,
        "Mistral API (or your server)",
        [
            "AUTOPILOT_MODEL_URL, key from the Secret block",
        ],
        "#f3e1f0",
    ),
}
#: (points the arrow goes through, its label, where the label goes)
ARROWS = [
    ([(9.6, 8.3), (10.2, 8.3)], "jobs", (9.9, 8.45)),
    ([(5.0, 8.3), (4.4, 8.3)], "states", (4.7, 8.45)),
    ([(11.0, 7.6), (8.2, 6.2)], "", (0, 0)),
    ([(12.0, 7.6), (12.0, 6.2)], "", (0, 0)),
    ([(5.0, 4.6), (4.4, 4.6)], "model", (4.7, 4.75)),
    ([(5.6, 6.2), (3.6, 7.2)], "task states, Secret block", (3.5, 6.55)),
    ([(7.1, 3.4), (7.1, 2.5)], "", (0, 0)),
    ([(11.7, 3.4), (11.7, 2.5)], "", (0, 0)),
    ([(4.7, 7.2), (4.7, 1.4), (5.0, 1.4)], "", (0, 0)),
]


def draw(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(14, 9.6), dpi=100)
    ax.set_xlim(0, 14)
    ax.set_ylim(0, 9.6)
    ax.axis("off")
    for x, y, w, h, title, lines, colour in BOXES.values():
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.05", fc=colour, ec="#555"))
        ax.text(x + 0.15, y + h - 0.35, title, fontsize=12, fontweight="bold", va="center")
        for i, line in enumerate(lines):
            ax.text(x + 0.15, y + h - 0.8 - 0.42 * i, line, fontsize=9.5, va="center")
    for points, label, at in ARROWS:
        for a, b in itertools.pairwise(points[:-1]):
            ax.plot([a[0], b[0]], [a[1], b[1]], color="#444", lw=1.2)
        ax.add_patch(
            FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=14,
                            color="#444", lw=1.2, shrinkA=0, shrinkB=0)
        )  # fmt: skip
        if label:
            ax.text(*at, label, fontsize=9, ha="center")
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)

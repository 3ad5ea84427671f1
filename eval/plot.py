"""Score against completion tokens (matplotlib PNG beside the report): one curve per checkpoint,
one point per K (best-of-K spends K episodes' tokens), so a model that solves the same tasks with
fewer tokens sits further left."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence


def score_vs_tokens(
    curves: Mapping[str, Sequence[tuple[float, float, int]]], path: str, title: str = ""
) -> str:
    """curves: label -> [(completion tokens per task, score, K)]; writes a PNG; returns its path."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    if not curves or not any(curves.values()):
        raise ValueError("score_vs_tokens: no points to plot")
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for label, points in curves.items():
        pts = sorted(points)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        ax.plot(xs, ys, marker="o", label=label)
        for x, y, k in pts:
            ax.annotate(f"K={k}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if all(p[0] > 0 for pts in curves.values() for p in pts):
        ax.set_xscale("log")  # token budgets span orders of magnitude across K and models
    ax.set_xlabel("completion tokens per task (K samples)")
    ax.set_ylabel("best-of-K pass rate")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or "agentic suite: score vs completion tokens")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path

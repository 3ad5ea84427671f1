"""One report schema for every suite, written to <dir>/eval/<name>/report.json.

    {"schema": "composer-jax/eval-report/v1", "suite": "humaneval", "checkpoint": "...",
     "metrics": {"pass@1": 0.0, ...},          # name -> number
     "items": [{"id": "HumanEval/0", ...}],    # one row per problem / task / checkpoint
     "tokens": {"prompt": 123, "completion": 456},
     "wall_time_s": 12.3, "seed": 0, "config": {...}}

Everything but wall_time_s is a function of the command and the checkpoint (see each suite's
seeding), so two runs of the same command give the same report up to wall_time_s.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

SCHEMA = "composer-jax/eval-report/v1"
# field -> allowed types
FIELDS: dict[str, tuple[type, ...]] = {
    "schema": (str,),
    "suite": (str,),
    "checkpoint": (str,),
    "metrics": (dict,),
    "items": (list,),
    "tokens": (dict,),
    "wall_time_s": (int, float),
    "seed": (int,),
    "config": (dict,),
}


def make_report(
    suite: str,
    checkpoint: str,
    metrics: dict,
    items: list[dict],
    tokens: dict,
    wall_time_s: float,
    seed: int,
    config: dict,
) -> dict:
    report = dict(
        schema=SCHEMA,
        suite=suite,
        checkpoint=checkpoint,
        metrics={k: float(v) for k, v in metrics.items()},
        items=items,
        tokens={k: int(v) for k, v in tokens.items()},
        wall_time_s=float(wall_time_s),
        seed=int(seed),
        config=config,
    )
    validate_report(report)
    return report


def validate_report(report: dict) -> None:
    """Raises ValueError naming the first field that breaks the schema."""
    if not isinstance(report, dict):
        raise ValueError(f"report: expected a JSON object, got {type(report).__name__}")
    unknown = set(report) - set(FIELDS)
    if unknown:
        raise ValueError(f"report: unknown field(s) {sorted(unknown)}")
    for name, types in FIELDS.items():
        if name not in report:
            raise ValueError(f"report: missing field {name!r}")
        if not isinstance(report[name], types) or isinstance(report[name], bool):
            raise ValueError(f"report.{name}: expected {types[0].__name__}")
    if report["schema"] != SCHEMA:
        raise ValueError(f"report.schema: expected {SCHEMA!r}, got {report['schema']!r}")
    for k, v in report["metrics"].items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise ValueError(f"report.metrics.{k}: expected a finite number, got {v!r}")
    for k, v in report["tokens"].items():
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"report.tokens.{k}: expected a count >= 0, got {v!r}")
    for i, item in enumerate(report["items"]):
        if not isinstance(item, dict) or "id" not in item:
            raise ValueError(f"report.items[{i}]: expected an object with an 'id'")
    json.dumps(report)  # everything must serialize


def report_dir(root: str, name: str) -> str:
    return os.path.join(root, "eval", name)


def write_report(report: dict, root: str, name: str) -> str:
    """Writes <root>/eval/<name>/report.json atomically; returns its path."""
    validate_report(report)
    out = report_dir(root, name)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "report.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)
    return path


def read_report(path: str) -> dict:
    with open(path) as f:
        report = json.load(f)
    validate_report(report)
    return report


def metrics_table(rows: list[tuple[str, dict]]) -> str:
    """A plain-text table: one row per (label, metrics); columns are the union of metric names."""
    cols = []
    for _, m in rows:
        cols += [k for k in m if k not in cols]
    width = max([len("checkpoint")] + [len(label) for label, _ in rows])
    head = "checkpoint".ljust(width) + "".join(f"  {c:>12}" for c in cols)
    lines = [head, "-" * len(head)]
    for label, m in rows:
        cells = "".join(f"  {_fmt(m.get(c)):>12}" for c in cols)
        lines.append(label.ljust(width) + cells)
    return "\n".join(lines)


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


class Progress:
    """'[suite] i/n ... elapsed, eta' lines on stderr, at most every `every_s` seconds."""

    def __init__(self, suite: str, total: int, every_s: float = 5.0, stream=None):
        self.suite, self.total, self.every_s = suite, total, every_s
        self.stream = stream or sys.stderr
        self.t0 = self.last = time.perf_counter()
        self.done = 0

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last < self.every_s and self.done < self.total:
            return
        self.last = now
        elapsed = now - self.t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        print(
            f"[{self.suite}] {self.done}/{self.total} {note} {elapsed:.0f}s elapsed, eta "
            f"{eta:.0f}s",
            file=self.stream,
            flush=True,
        )

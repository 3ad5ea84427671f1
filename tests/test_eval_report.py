"""The report schema (every suite writes it) and the score-vs-tokens plot."""

import json
import math

import pytest

from eval import plot
from eval import report as rp


def _report(**overrides):
    base = dict(
        suite="nll",
        checkpoint="ckpt",
        metrics={"nll@128": 2.5},
        items=[{"id": "context=128", "nll": 2.5}],
        tokens={"target": 10},
        wall_time_s=1.0,
        seed=0,
        config={"a": 1},
    )
    base.update(overrides)
    return rp.make_report(**base)


def test_round_trip(tmp_path):
    r = _report()
    path = rp.write_report(r, str(tmp_path), "nll")
    assert path == str(tmp_path / "eval" / "nll" / "report.json")
    assert rp.read_report(path) == r


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda r: r.pop("metrics"), "missing field 'metrics'"),
        (lambda r: r.update(extra=1), "unknown field"),
        (lambda r: r["metrics"].update(x=math.nan), "metrics.x"),
        (lambda r: r["metrics"].update(x="high"), "metrics.x"),
        (lambda r: r["tokens"].update(t=-1), "tokens.t"),
        (lambda r: r["items"].append({"no_id": 1}), r"items\[1\]"),
        (lambda r: r.update(schema="v0"), "schema"),
        (lambda r: r.update(seed=True), "seed"),
    ],
)
def test_validation_names_the_bad_field(mutate, match):
    r = json.loads(json.dumps(_report()))
    mutate(r)
    with pytest.raises(ValueError, match=match):
        rp.validate_report(r)


def test_table_lists_every_metric():
    table = rp.metrics_table([("a", {"pass@1": 0.25}), ("b", {"pass@1": 0.5, "pass@10": 1.0})])
    lines = table.splitlines()
    assert "pass@1" in lines[0] and "pass@10" in lines[0]
    assert lines[2].split() == ["a", "0.25", "-"] and lines[3].split() == ["b", "0.5", "1"]


def test_plot_is_a_nonempty_png(tmp_path):
    path = plot.score_vs_tokens(
        {"a": [(100, 0.2, 1), (200, 0.3, 2)], "b": [(50, 0.25, 1), (100, 0.4, 2)]},
        str(tmp_path / "p.png"),
    )
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    with pytest.raises(ValueError, match="no points"):
        plot.score_vs_tokens({}, str(tmp_path / "q.png"))

"""bench/common.py's helpers that every bench shares: figures over seeds (issue 55: a learning
claim is reported as mean, min and max over its seeds, hand-computed here), the --seeds parser's
errors, and --tiny's defaults (a flag given on the command line still wins)."""

import argparse

import pytest

from bench.common import curves_over_seeds, over_seeds, parse_seeds, parse_tiny, seeds_line


def test_over_seeds_mean_min_max_by_hand():
    s = over_seeds({100: 0.5, 101: 0.75, 102: 1.0})
    assert s["seeds"] == [100, 101, 102] and s["per_seed"] == {100: 0.5, 101: 0.75, 102: 1.0}
    assert (s["mean"], s["min"], s["max"]) == (0.75, 0.5, 1.0)
    line = seeds_line("reward", over_seeds({0: 0.25, 1: 0.75}), ".2f")
    assert line == "reward over seeds [0, 1]: mean 0.50 min 0.25 max 0.75 (0: 0.25, 1: 0.75)"
    with pytest.raises(ValueError, match="no seeds"):
        over_seeds({})


def test_curves_over_seeds_per_step_and_cut_to_the_shortest():
    c = curves_over_seeds({0: [0.0, 1.0, 0.5], 1: [1.0, 0.0], 2: [0.5, 0.5, 0.5, 0.5]})
    assert c == {"mean": [0.5, 0.5], "min": [0.0, 0.0], "max": [1.0, 1.0]}


def test_parse_seeds_and_its_errors():
    assert parse_seeds("100,101, 102") == [100, 101, 102]
    for bad, why in (("1,x", "integers"), ("3,3", "each once"), ("", "at least one")):
        with pytest.raises(ValueError, match=why):
            parse_seeds(bad)


def test_tiny_sets_defaults_and_a_given_flag_wins():
    def parser():
        ap = argparse.ArgumentParser()
        ap.add_argument("--steps", type=int, default=300)
        ap.add_argument("--preset", default="small")
        return ap

    tiny = dict(steps=1, preset="tiny")
    assert vars(parse_tiny(parser(), tiny, [])) == {"steps": 300, "preset": "small", "tiny": False}
    got = parse_tiny(parser(), tiny, ["--tiny", "--steps", "2"])
    assert (got.steps, got.preset, got.tiny) == (2, "tiny", True)

"""bench/bench_copy.py: its rows score exactly the bytes a copier can know; its smoke run prints
the table and both probes (-m long: it compiles the tiny preset)."""

import re

import numpy as np
import pytest
from bench_tiny_common import NUM, run_tiny

from bench import bench_copy as b


def test_fixed_rows_score_the_copied_half():
    tokens, scored = b.fixed_row(np.random.default_rng(0), 16)
    assert (tokens[16:] == tokens[:16]).all() and scored.tolist() == [0] * 16 + [1] * 16


def test_induction_rows_score_only_bytes_an_earlier_occurrence_gives():
    """Every scored target is, after the byte before it, what followed that byte in a name's
    earlier occurrence; the first byte of each repeated name is not scored."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        tokens, scored = b.induction_row(rng, 64)
        assert len(tokens) == len(scored) == 128 and scored.sum() >= 4 * 4
        starts = [t for t in range(1, 128) if tokens[t - 1] == b.SPACE and tokens[t] != b.SPACE]
        second = starts[-4]  # the shuffled list's first name
        for t in np.flatnonzero(scored):
            assert t > second and tokens[t - 1] != b.SPACE
            back = tokens[max(0, t - 12) : t]  # the name so far, from its leading space
            name = back[np.flatnonzero(back == b.SPACE)[-1] + 1 :]
            first = tokens[:second].tolist()
            found = [
                j for j in range(len(first)) if first[j : j + len(name) + 1] == [*name, tokens[t]]
            ]
            assert found, (t, name)
        assert all(scored[s] == 0 for s in starts[-4:])


@pytest.mark.long
def test_smoke_run_prints_the_table_and_both_probes():
    out = run_tiny("bench_copy.py")
    rows = re.findall(rf"^\| (\d+) \| {NUM} \| \d+ \|$", out, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"], out
    for when in ("before", "after"):
        line = re.search(rf"name-copy probe {when}: trained names: exact {NUM} bytes {NUM}; "
                         rf"fresh names: exact {NUM} bytes {NUM}", out)  # fmt: skip
        assert line and all(0 <= float(x) <= 1 for x in line.groups()), out

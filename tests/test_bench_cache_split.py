"""bench/bench_cache_split.py at the smoke scale (--tiny, in this process: conftest's 8 simulated
devices): the split engine decodes the unsplit engine's greedy tokens, holds 1/4 of its cache per
device, and both report a decode rate. The default run measures the slot split (expert 4 x
tensor 2); both of the bench's layouts (+ the sequence split over context 4) are `long`."""

import pytest

from bench import bench_cache_split as bench


def _rows(text: str) -> list[list[str]]:
    rows = [r for r in text.splitlines() if r.startswith("| ") and "tok/s" not in r]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows if "---" not in r]


def _check(cells: list[str]):
    unsplit, split = float(cells[2]), float(cells[3])
    assert unsplit > 0 and split > 0, cells
    whole, part = (float(x) for x in cells[5].split("->"))
    assert whole == 4 * part, cells  # the split axis has 4 chips
    assert cells[6].startswith("yes"), cells  # the same greedy tokens


# long: 36 s in the suite; the split cache's equality is the default run's in
# tests/test_engine_cache_split.py
@pytest.mark.long
def test_tiny_slot_split_decodes_the_same_tokens_on_a_quarter_of_the_cache(capsys):
    bench.main(["--tiny", "--layouts", "expert4_tensor2:slots"])
    (cells,) = _rows(capsys.readouterr().out)
    assert cells[:2] == ["expert 4 x tensor 2", "slots"]
    _check(cells)


@pytest.mark.long
def test_tiny_run_of_both_layouts(capsys):
    bench.main(["--tiny"])
    rows = _rows(capsys.readouterr().out)
    assert [r[1] for r in rows] == ["slots", "sequence"]
    for cells in rows:
        _check(cells)


def test_bad_layout_is_a_one_line_error():
    with pytest.raises(ValueError, match="'expert4_tensor2:heads'.*split must be one of"):
        bench.parse_layout("expert4_tensor2:heads")
    with pytest.raises(ValueError, match="'chips4' is not a mesh axis"):
        bench.parse_layout("chips4:slots")

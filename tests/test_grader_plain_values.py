"""rl/envs/grading/grader/plain_values.py, the one value encoding of both sandboxed graders: round
trips, refusals (subclasses, always-equal objects, sizes) and the decoder's validation, in-process
(the graders' sandboxed runs are tests/test_envs_adversarial.py and
tests/test_eval_humaneval*.py)."""

import math

import pytest

from eval.humaneval_grader import wire
from rl.envs.grading.grader import plain_values as pv
from rl.envs.grading.grader import strict_eq

VALUES = [
    None, True, False, 0, -7, 2**200, -(2**70), 1.5, -0.0, math.inf, 3 + 4j, "", "héllo",
    b"\x00\xff",
    [1, [2, (3, "x")]], (), {1: "a", "k": [None], (1, 2): {"n": 1.25}}, {1, 2, "s"},
    frozenset({(1, 2), "t"}), [set(), frozenset(), {}],
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=[str(i) for i in range(len(VALUES))])
def test_round_trip_keeps_value_and_exact_types(value):
    back = pv.decode(pv.encode(value))
    assert back == value and type(back) is type(value)
    assert pv.is_plain(value)


def test_nan_round_trips():
    assert math.isnan(pv.decode(pv.encode(math.nan)))


class AlwaysEqual:
    def __eq__(self, other):
        return True


class MyInt(int):
    pass


@pytest.mark.parametrize("value", [AlwaysEqual(), MyInt(3), [1, MyInt(2)], {"k": AlwaysEqual()}])
def test_values_of_other_types_are_refused_and_not_plain(value):
    with pytest.raises(pv.Refused):
        pv.encode(value)
    assert not pv.is_plain(value)


def test_eq_needs_plain_values_on_both_sides_or_neither():
    assert not strict_eq.eq(AlwaysEqual(), [1]) and not strict_eq.eq(MyInt(3), 3)
    assert strict_eq.eq([1, (2,)], [1, (2,)]) and not strict_eq.eq([1], [2])
    assert strict_eq.eq(AlwaysEqual(), object())  # two user objects: == decides (canaries catch it)


def test_limits_hold_on_both_sides():
    deep = []
    for _ in range(pv.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(pv.Refused):
        pv.encode(deep)
    assert not pv.is_plain(deep)
    with pytest.raises(pv.Refused):
        pv.encode(list(range(10)), max_nodes=10)  # the list itself is a node: 11 in all
    assert pv.decode(pv.encode(list(range(9)), max_nodes=10), max_nodes=10) == list(range(9))
    with pytest.raises(ValueError):
        pv.decode(pv.encode(list(range(10))), max_nodes=10)
    big = 1 << (4 * pv.MAX_INT_HEX_DIGITS)  # one hex digit too many
    with pytest.raises(pv.Refused):
        pv.encode(big)
    assert pv.decode(pv.encode(big - 1)) == big - 1
    with pytest.raises(ValueError):
        pv.decode(["i", hex(big)])


@pytest.mark.parametrize(
    "node",
    [
        [], "x", ["n", 1], ["b", 1], ["i", "ff"], ["i", "0xFF"], ["i", " 0x1"], ["i", 5],
        ["s", 5], ["q"], ["l", "ab"], ["S", [["l", []]]], ["d", [[["l", []], ["n"]]]],
        ["d", [["n"]]], ["c", "0x1p+0"],
    ],
    ids=str,
)  # fmt: skip
def test_decode_refuses_what_encode_cannot_have_written(node):
    with pytest.raises(ValueError):
        pv.decode(node)


def test_the_graders_share_the_one_encoding():
    assert wire.encode is pv.encode and wire.decode is pv.decode
    sid, other = "test-plain-values-sid", "test-plain-values-other"  # ids no other test uses
    assert strict_eq.seal({"a": [1, 2.5]}, sid) and not strict_eq.seal(AlwaysEqual(), other)
    assert pv.decode(strict_eq.RECORDS[sid][0], strict_eq.RECORD_NODES) == {"a": [1, 2.5]}
    assert strict_eq.RECORDS[other] == [strict_eq.REFUSED]

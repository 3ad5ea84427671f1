"""Comparisons used by hardened hidden-test asserts (installed in the sandbox as `_rl_grader.py`).

`eq`: `assert L == R` becomes `assert eq(L, R)`: when one side is made only of plain builtin
values (exact types: a list subclass does not count), the other side must be too, so an object
whose `__eq__` always answers True (or a str/int/list subclass doing the same) cannot equal an
expected literal. Builtin `==` then decides. Otherwise (two user objects) plain `==` decides, and
canaries catch always-equal objects there.

`seal`: `assert L == <constant>` becomes `assert seal(L, "<id>")`: the expected value never enters
the sandbox (not even the hardened test file). `seal` records a canonical encoding of L under the
id and returns True; the host decides, comparing every recorded value with the expected value it
kept (rl/envs/tasks.py). Only plain builtin values (exact types, bounded depth and size) are
encoded; anything else records the marker "refused" and fails the assert here as well.

Names are bound at import, before any repo code is imported. The code under test runs in the
same process and can rewrite RECORDS: it gains nothing by that, since it cannot know the expected
values (a missing or wrong record fails the test on the host).
"""

import json as _json

_SAFE = frozenset(
    {bool, int, float, complex, str, bytes, type(None), list, tuple, dict, set, frozenset}
)
_type, _all, _len, _hex = type, all, len, hex
_float_hex, _bytes_hex, _dict_items = float.hex, bytes.hex, dict.items
_dumps = _json.dumps

RECORD_NODES = 20000  # values with more nodes than this are refused (encoding is bounded)
RECORD_BYTES = 64 << 10  # one encoded value
TOTAL_BYTES = 256 << 10  # every value recorded by one test file's process
PER_ID = 8  # distinct values kept per sealed assert; more records "overflow"
REFUSED, OVERFLOW = "refused", "overflow"  # markers: the host counts them as a mismatch

RECORDS: dict = {}  # sealed id -> list of encoded values (or markers), as the report sends them
_seen: dict = {}  # sealed id -> set of encodings already recorded
_used = [0]  # bytes recorded so far


def _pure(value, depth: int = 0) -> bool:
    kind = _type(value)
    if kind not in _SAFE:
        return False
    if depth > 100:  # deep enough: treat as impure rather than recurse without bound
        return False
    if kind is dict:
        return _all(_pure(k, depth + 1) and _pure(v, depth + 1) for k, v in value.items())
    if kind in (list, tuple, set, frozenset):
        return _all(_pure(v, depth + 1) for v in value)
    return True


def eq(left, right) -> bool:
    left_pure, right_pure = _pure(left), _pure(right)
    if left_pure != right_pure:
        return False
    return bool(left == right)


class _Refused(Exception):
    pass


_SEQUENCES = {list: "l", tuple: "t", set: "S", frozenset: "F"}


def _encode(value, depth: int, budget: list):
    """[tag, payload...] for a plain builtin value of exact type; runs no code of the value."""
    budget[0] -= 1
    if depth > 100 or budget[0] < 0:
        raise _Refused
    kind = _type(value)
    if value is None:
        return ["n"]
    if kind is bool:
        return ["b", value]
    if kind is int:
        return ["i", _hex(value)]
    if kind is float:
        return ["f", _float_hex(value)]
    if kind is complex:
        return ["c", _float_hex(value.real), _float_hex(value.imag)]
    if kind is str:
        return ["s", value]
    if kind is bytes:
        return ["y", _bytes_hex(value)]
    if kind is dict:
        return [
            "d",
            [
                [_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)]
                for k, v in _dict_items(value)
            ],
        ]
    tag = _SEQUENCES.get(kind)
    if tag is None:
        raise _Refused
    return [tag, [_encode(v, depth + 1, budget) for v in value]]


def _record(sid, encoded, text) -> None:
    records = RECORDS.setdefault(sid, [])
    seen = _seen.setdefault(sid, set())
    if text in seen:
        return
    seen.add(text)
    records.append(encoded)


def seal(value, sid) -> bool:
    """Records `value` for the sealed assert `sid`; True when it could be recorded."""
    try:
        encoded = _encode(value, 0, [RECORD_NODES])
        text = _dumps(encoded)
    except (_Refused, RecursionError, ValueError, TypeError, OverflowError):
        _record(sid, REFUSED, REFUSED)
        return False
    if text in _seen.get(sid, ()):
        return True
    too_many = _len(_seen.get(sid, ())) >= PER_ID
    if _len(text) > RECORD_BYTES or _used[0] + _len(text) > TOTAL_BYTES or too_many:
        _record(sid, OVERFLOW, OVERFLOW)
        return False
    _used[0] += _len(text)
    _record(sid, encoded, text)
    return True

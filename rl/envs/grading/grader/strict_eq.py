"""Comparisons used by hardened hidden-test asserts (installed in the sandbox as `_rl_grader.py`).

`eq`: `assert L == R` becomes `assert eq(L, R)`: when one side is made only of plain builtin
values (exact types: a list subclass does not count), the other side must be too, so an object
whose `__eq__` always answers True (or a str/int/list subclass doing the same) cannot equal an
expected literal. Builtin `==` then decides. Otherwise (two user objects) plain `==` decides, and
canaries catch always-equal objects there.

`seal`: `assert L == <constant>` becomes `assert seal(L, "<id>")`: the expected value never enters
the sandbox (not even the hardened test file). `seal` records L's encoding (plain_values.py) under
the id and returns True; the host decodes it and decides, comparing every recorded value with the
expected value it kept (rl/envs/grading/tasks.py). Only plain builtin values (exact types, bounded
depth and size) are encoded; anything else records the marker "refused" and fails the assert here as
well.

Names are bound at import, before any repo code is imported. The code under test runs in the
same process and can rewrite RECORDS: it gains nothing by that, since it cannot know the expected
values (a missing or wrong record fails the test on the host).
"""

import json as _json

if __package__:  # on the host: rl.envs.grading.grader.strict_eq
    from . import plain_values as _plain_values
else:
    # in the sandbox: _rl_grader, with the shared module beside it
    # (rl/envs/grading/grader/__init__.py)
    import _grader_plain_values as _plain_values

_len = len
_dumps = _json.dumps
_is_plain, _encode, _Refused = _plain_values.is_plain, _plain_values.encode, _plain_values.Refused

RECORD_NODES = 20000  # values with more nodes than this are refused (encoding is bounded)
RECORD_BYTES = 64 << 10  # one encoded value
TOTAL_BYTES = 256 << 10  # every value recorded by one test file's process
PER_ID = 8  # distinct values kept per sealed assert; more records "overflow"
REFUSED, OVERFLOW = "refused", "overflow"  # markers: the host counts them as a mismatch

RECORDS: dict = {}  # sealed id -> list of encoded values (or markers), as the report sends them
_seen: dict = {}  # sealed id -> set of encodings already recorded
_used = [0]  # bytes recorded so far


def eq(left, right) -> bool:
    left_pure, right_pure = _is_plain(left), _is_plain(right)
    if left_pure != right_pure:
        return False
    return bool(left == right)


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
        encoded = _encode(value, RECORD_NODES)
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

"""Comparison used by hardened hidden-test asserts (installed in the sandbox as `_rl_grader.py`).

`assert L == R` becomes `assert eq(L, R)`: when one side is made only of plain builtin values
(exact types: a list subclass does not count), the other side must be too, so an object whose
`__eq__` always answers True (or a str/int/list subclass doing the same) cannot equal an expected
literal. Builtin `==` then decides. Otherwise (two user objects) plain `==` decides, and canaries
catch always-equal objects there. Names are bound at import, before any repo code is imported.
"""

_SAFE = frozenset(
    {bool, int, float, complex, str, bytes, type(None), list, tuple, dict, set, frozenset}
)
_type, _all, _len = type, all, len


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

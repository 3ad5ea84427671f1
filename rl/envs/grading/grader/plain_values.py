"""Plain builtin values of exact types, as tagged JSON: the one encoding a sandboxed grader uses to
send values to a process that trusts none of its sender's objects.

Users: the hidden-test grader's sealed asserts (strict_eq.py records `encode(value)` in the sandbox;
the host, rl/envs/grading/tasks.py, reads the report back with `decode`) and eval's HumanEval grader
(eval/humaneval_grader/wire.py: arguments and answers between the trusted runner and the candidate
server). Standard library only, imports nothing of the project: in a sandbox it is installed beside
its users (rl/envs/grading/grader/__init__.py says under which name).

    None -> ["n"]        bool -> ["b", v]        int -> ["i", hex(v)]      float -> ["f", v.hex()]
    complex -> ["c", real.hex(), imag.hex()]     str -> ["s", v]           bytes -> ["y", v.hex()]
    dict -> ["d", [[key, value], ...]]           list -> ["l", [item, ...]]
    tuple, set, frozenset -> ["t" | "S" | "F", [item, ...]]

`encode` accepts only values of exact builtin types (a subclass of int/str/list does not count, so
an object whose `__eq__` always answers True never crosses) and runs no code of the value: the
names it calls are bound at import, before any untrusted code runs in the process. `decode`
builds fresh values of exactly those types, accepting only what `encode` writes (canonical ints).
Both are bounded in depth, nodes and int size, so a hostile message fails to decode (ValueError)
instead of exhausting its reader, and whatever `encode` accepts, `decode` accepts.
"""

import re

MAX_DEPTH = 100  # the top value is at depth 0
MAX_NODES = 200_000  # values in one message (each dict key and value counts)
MAX_INT_HEX_DIGITS = 20_000  # ints of up to 80,000 bits (no test's value comes near)

PLAIN_TYPES = frozenset(
    {bool, int, float, complex, str, bytes, type(None), list, tuple, dict, set, frozenset}
)
_SEQUENCES = {list: "l", tuple: "t", set: "S", frozenset: "F"}
_BUILDERS = {"l": list, "t": tuple, "S": set, "F": frozenset}
_CANONICAL_INT = re.compile(r"-?0x[0-9a-f]+")  # what hex() writes

# Bound now: code that runs later in the same process (a sealed assert's) may patch builtins.
_type, _all, _hex, _bit_length = type, all, hex, int.bit_length
_float_hex, _bytes_hex, _dict_items = float.hex, bytes.hex, dict.items


class Refused(ValueError):
    """A value that is not made only of plain builtin values (or is too large to send)."""


def is_plain(value, depth: int = 0) -> bool:
    """Made only of exact builtin types (PLAIN_TYPES), at most MAX_DEPTH deep; no size bound."""
    kind = _type(value)
    if kind not in PLAIN_TYPES or depth > MAX_DEPTH:
        return False
    if kind is dict:
        items = _dict_items(value)
        return _all(is_plain(k, depth + 1) and is_plain(v, depth + 1) for k, v in items)
    if kind in _SEQUENCES:
        return _all(is_plain(v, depth + 1) for v in value)
    return True


def encode(value, max_nodes: int = MAX_NODES):
    """[tag, payload...] for a plain value of exact types; Refused for anything else."""
    return _encode(value, 0, [max_nodes])


def _encode(value, depth: int, budget: list):
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise Refused("value too deep or too large")
    kind = _type(value)
    if value is None:
        return ["n"]
    if kind is bool:
        return ["b", value]
    if kind is int:
        if _bit_length(value) > 4 * MAX_INT_HEX_DIGITS:
            raise Refused("int too large")
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
        items = _dict_items(value)
        return [
            "d",
            [[_encode(k, depth + 1, budget), _encode(v, depth + 1, budget)] for k, v in items],
        ]
    tag = _SEQUENCES.get(kind)
    if tag is None:
        raise Refused(f"a {kind.__name__} is not a plain builtin value")
    return [tag, [_encode(v, depth + 1, budget) for v in value]]


def decode(node, max_nodes: int = MAX_NODES):
    """The value `encode` described; ValueError for anything `encode` cannot have written."""
    return _decode(node, 0, [max_nodes])


def _decode(node, depth: int, budget: list):
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise ValueError("value too deep or too large")
    if type(node) is not list or not node or type(node[0]) is not str:
        raise ValueError("malformed value")
    tag, rest = node[0], node[1:]
    if tag == "n" and not rest:
        return None
    if tag == "b" and len(rest) == 1 and type(rest[0]) is bool:
        return rest[0]
    if tag == "i" and len(rest) == 1 and type(rest[0]) is str:
        return _decode_int(rest[0])
    if tag == "f" and len(rest) == 1 and type(rest[0]) is str:
        return float.fromhex(rest[0])
    if tag == "c" and len(rest) == 2 and all(type(x) is str for x in rest):
        return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
    if tag == "s" and len(rest) == 1 and type(rest[0]) is str:
        return rest[0]
    if tag == "y" and len(rest) == 1 and type(rest[0]) is str:
        return bytes.fromhex(rest[0])
    if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
        pairs = [_decode_pair(kv, depth, budget) for kv in rest[0]]
        return dict(pairs)
    if tag in _BUILDERS and len(rest) == 1 and type(rest[0]) is list:
        items = [_decode(v, depth + 1, budget) for v in rest[0]]
        try:
            return _BUILDERS[tag](items)
        except TypeError:  # an unhashable item in a set
            raise ValueError("malformed set") from None
    raise ValueError(f"malformed value (tag {tag!r})")


def _decode_int(text: str) -> int:
    digits = len(text) - 2 - text.startswith("-")
    if digits > MAX_INT_HEX_DIGITS or not _CANONICAL_INT.fullmatch(text):
        raise ValueError("malformed or too large int")
    return int(text, 16)


def _decode_pair(pair, depth: int, budget: list) -> tuple:
    if type(pair) is not list or len(pair) != 2:
        raise ValueError("malformed dict item")
    key = _decode(pair[0], depth + 1, budget)
    try:
        hash(key)
    except TypeError:
        raise ValueError("unhashable dict key") from None
    return key, _decode(pair[1], depth + 1, budget)

"""Plain builtin values on the wire between the trusted runner and the untrusted candidate server.

`encode` accepts only values of exact builtin types (a subclass of int/str/list does not count, so an
object whose `__eq__` always answers True never crosses); `decode` builds fresh values of exactly
those types from JSON, running no code of the sender. Both are bounded in depth and size, so a hostile
message fails to decode (ValueError) instead of exhausting the runner.
"""

import json

MAX_DEPTH = 100
MAX_NODES = 200_000
MAX_MESSAGE_BYTES = 4 << 20  # one JSON line: far above any HumanEval value, far below memory limits
MAX_INT_HEX_DIGITS = 20_000  # ints of up to 80,000 bits (HumanEval's largest results are tiny)

_SEQUENCES = {list: "l", tuple: "t", set: "S", frozenset: "F"}
_BUILDERS = {"l": list, "t": tuple, "S": set, "F": frozenset}


class Refused(ValueError):
    """A value that is not made only of plain builtin values (or is too large to send)."""


def encode(value, depth: int = 0, budget: list | None = None):
    """[tag, payload...] for a plain builtin value of exact type."""
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    if depth > MAX_DEPTH or budget[0] < 0:
        raise Refused("value too deep or too large")
    kind = type(value)
    if value is None:
        return ["n"]
    if kind is bool:
        return ["b", value]
    if kind is int:
        return ["i", hex(value)]
    if kind is float:
        return ["f", float.hex(value)]
    if kind is complex:
        return ["c", float.hex(value.real), float.hex(value.imag)]
    if kind is str:
        return ["s", value]
    if kind is bytes:
        return ["y", bytes.hex(value)]
    if kind is dict:
        items = dict.items(value)
        return [
            "d",
            [[encode(k, depth + 1, budget), encode(v, depth + 1, budget)] for k, v in items],
        ]
    tag = _SEQUENCES.get(kind)
    if tag is None:
        raise Refused(f"a {kind.__name__} is not a plain builtin value")
    return [tag, [encode(v, depth + 1, budget) for v in value]]


def decode(node, depth: int = 0, budget: list | None = None):
    """The value `encode` described; ValueError for anything malformed."""
    budget = [MAX_NODES] if budget is None else budget
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
        if len(rest[0]) > MAX_INT_HEX_DIGITS:
            raise ValueError("int too large")
        return int(rest[0], 16)
    if tag == "f" and len(rest) == 1 and type(rest[0]) is str:
        return float.fromhex(rest[0])
    if tag == "c" and len(rest) == 2 and all(type(x) is str for x in rest):
        return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
    if tag == "s" and len(rest) == 1 and type(rest[0]) is str:
        return rest[0]
    if tag == "y" and len(rest) == 1 and type(rest[0]) is str:
        return bytes.fromhex(rest[0])
    if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
        return {_decode_key(kv, depth, budget): decode(kv[1], depth + 1, budget) for kv in rest[0]}
    if tag in _BUILDERS and len(rest) == 1 and type(rest[0]) is list:
        items = [decode(v, depth + 1, budget) for v in rest[0]]
        try:
            return _BUILDERS[tag](items)
        except TypeError:  # an unhashable item in a set
            raise ValueError("malformed set") from None
    raise ValueError(f"malformed value (tag {tag!r})")


def _decode_key(pair, depth: int, budget: list):
    if type(pair) is not list or len(pair) != 2:
        raise ValueError("malformed dict item")
    key = decode(pair[0], depth + 1, budget)
    try:
        hash(key)
    except TypeError:
        raise ValueError("unhashable dict key") from None
    return key


def dumps_line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def loads_line(line: bytes) -> dict:
    """One JSON object; ValueError for anything else (including nesting deep enough to recurse)."""
    if len(line) > MAX_MESSAGE_BYTES:
        raise ValueError("message too large")
    try:
        message = json.loads(line)
    except RecursionError:
        raise ValueError("message nested too deeply") from None
    if type(message) is not dict:
        raise ValueError("message is not an object")
    return message

"""The line protocol between the trusted HumanEval runner and the untrusted candidate server: one
JSON object per line, bounded in size, carrying plain builtin values in the one sandbox value
encoding (rl/envs/grading/grader/plain_values.py: `encode` refuses anything but exact builtin types,
so an object whose `__eq__` always answers True never crosses; `decode` builds fresh values, runs no
code of the sender and fails with ValueError on anything hostile instead of exhausting the runner).
"""

import json

if __package__:  # on the host: eval.humaneval_grader.wire
    from rl.envs.grading.grader.plain_values import Refused, decode, encode
else:  # in the sandbox: installed beside the shared module (rl/envs/grading/grader/__init__.py)
    from _grader_plain_values import Refused, decode, encode

__all__ = ["MAX_MESSAGE_BYTES", "Refused", "decode", "dumps_line", "encode", "loads_line"]

MAX_MESSAGE_BYTES = 4 << 20  # one JSON line: far above any HumanEval value, far below memory limits


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

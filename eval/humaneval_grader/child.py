"""Untrusted candidate server: `python3 -I child.py SOLUTION ENTRY_POINT RESPONSE_FD`.

Runs the problem's prompt + the completion (SOLUTION, in the episode dir), then answers calls: one
JSON request per line on stdin ({"args": [...]}), one JSON response per line on RESPONSE_FD
({"value": ...} or {"error": "..."}). Everything here is at the completion's mercy (it runs in this
process and may patch, exit, fork or lie); the runner trusts none of it beyond the plain values it
decodes, and nothing this process can reach decides a pass.
"""

import os
import sys


def main() -> None:
    solution, entry_point, fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import wire  # before any completion code runs

    respond = os.fdopen(fd, "wb", buffering=0)
    namespace = {"__name__": "__main__", "__file__": solution}
    try:
        with open(solution) as f:
            exec(compile(f.read(), solution, "exec"), namespace)
        function = namespace[entry_point]
    except BaseException as e:  # SystemExit too: the program never defined a candidate
        respond.write(wire.dumps_line({"error": f"loading: {type(e).__name__}: {e}"[:300]}))
        return
    respond.write(wire.dumps_line({"ready": True}))
    for line in sys.stdin.buffer:
        respond.write(wire.dumps_line(answer(function, wire.loads_line(line), wire)))


def answer(function, request: dict, wire) -> dict:
    try:
        result = function(*wire.decode(request["args"]))
        return {"value": wire.encode(result)}
    except BaseException as e:  # reported, not raised: the runner decides what it means
        return {"error": f"{type(e).__name__}: {e}"[:300]}


if __name__ == "__main__":
    main()

"""Tasks and their grading: the Task and Grade types, hidden tests hardened
against tampering (harden.py) and run by the grader child process (grader/), the per-family
dispatch (dispatch.py: tests, code review, DevOps), and the oracle gates a task must pass before
it is used (verify.py). Python source is parsed through ast_parse.py's lock (thread-safe on 3.11).
"""

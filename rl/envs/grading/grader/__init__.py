"""Files installed read-only into the sandbox to run hidden tests (they import nothing of rl):
runner.py (trusted: runs each test file in a child, relays the reports), child.py (one hidden test
file under pytest), strict_eq.py (the hardened asserts' comparisons, installed as `_rl_grader`).

Two of them are shared with eval's HumanEval grader (eval/humaneval_grader/): plain_values.py (the
value encoding) and runner_process.py (a trusted runner's process handling). In a sandbox each is
installed as `_grader_<module>.py` (`shared_files`), a name no repo module is likely to have: the
grader dir comes first on a test child's sys.path.
"""

import os

SHARED = ("plain_values", "runner_process")
INSTALLED_PREFIX = "_grader_"  # the importers name these files so inside a sandbox


def shared_files() -> dict[str, str]:
    """{file name in a sandbox's grader dir: its source path} for the modules both graders use."""
    here = os.path.dirname(os.path.abspath(__file__))
    return {f"{INSTALLED_PREFIX}{name}.py": os.path.join(here, f"{name}.py") for name in SHARED}

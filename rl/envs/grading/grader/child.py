"""One hidden test file in a fresh interpreter: `python3 -I child.py TEST_FILE REPORT_FD`.

pytest is imported before the repo is put on sys.path, and the repo goes after the standard
library, so a repo `pytest.py`, `json.py` or `sitecustomize.py` is never what gets imported. pytest
reads only the grader's own ini (-c), the grader's conftest.py and the hidden tests (all read-only);
plugin autoloading is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD in the sandbox env), so a repo
`*.dist-info` entry point or a `pytest.ini`/`setup.cfg`/`pyproject.toml` addopts line does nothing.
The repository's declared test dependencies (a read-only folder: the manifest's "deps",
rl/envs/isolation/dep_cache.py) go last on sys.path, so they never shadow pytest or the stdlib.

Agent code still runs in this process (the tests import it) and can forge what it reports; the host
catches that with canary tests, strict comparisons and sealed expected values (see
rl/envs/grading/harden.py), not here. The report carries the values the sealed asserts recorded
(`_rl_grader.RECORDS`); the host compares them with expected values that never entered this process.
"""

import json
import os
import sys


class Collector:
    """nodeid -> "passed" | "failed" | "skipped": failed if any phase failed, passed only by
    call."""

    def __init__(self):
        self.outcomes: dict[str, str] = {}
        self.collect_errors: list[str] = []

    def pytest_runtest_logreport(self, report):
        previous = self.outcomes.get(report.nodeid)
        if previous == "failed":
            return
        if report.outcome != "passed" or report.when == "call":
            self.outcomes[report.nodeid] = report.outcome

    def pytest_collectreport(self, report):
        if report.outcome != "passed":
            self.collect_errors.append(report.nodeid or "<session>")


def main() -> None:
    path, fd = sys.argv[1], int(sys.argv[2])
    here = os.path.dirname(os.path.abspath(__file__))
    sys.dont_write_bytecode = True  # the grader dir is read-only; the repo's pyc is not ours
    import pytest

    site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
    sys.path.insert(site[0] if site else len(sys.path), os.getcwd())
    sys.path.insert(0, here)  # _rl_grader, the hardened asserts' comparison
    with open(os.path.join(here, "manifest.json")) as f:
        deps = json.load(f).get("deps")
    if deps:  # the repository's declared test dependencies (read-only): last, never shadowing
        sys.path.append(deps)
    import _rl_grader  # before any repo code: the sealed asserts' records live here

    collector = Collector()
    args = ["-q", "-p", "no:cacheprovider", "-c", os.path.join(here, "pytest.ini")]
    args += [f"--rootdir={here}", f"--confcutdir={here}", path]
    code = pytest.main(args, plugins=[collector])
    report = {
        "exitstatus": int(code),
        "outcomes": collector.outcomes,
        "collect_errors": collector.collect_errors,
        "seal_records": _rl_grader.RECORDS,
    }
    os.write(fd, json.dumps(report).encode())
    os.close(fd)
    sys.stdout.flush()
    os._exit(0)  # skip atexit hooks the code under test registered


if __name__ == "__main__":
    main()

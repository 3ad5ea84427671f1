"""The grader's static collector on test styles real projects ship (issue 50): tests defined
under module- and class-level `if` blocks (six, xmltodict), `@pytest.mark.usefixtures` tests
(munch), a test that calls another test (toolz), a test function imported from a helper module
(funcy's `from .py38_decorators import test_decorator_access_args`). Each case failed before its
fix: the report named ids the grader did not derive ("report names tests that do not exist":
fail closed, so the gate left the file out) or a renamed test could no longer be called."""

from rl.envs.grading.harden import drop_tests, harden_suite, iter_tests
from rl.envs.grading.tasks import Task, grade_in
from rl.envs.isolation.sandbox import Sandbox

# six.py's layout: the PY3/else branches both define test_b; Jython-only and PY2-only tests.
STYLES = """\
import sys
import pytest

PY3 = sys.version_info[0] == 3


@pytest.fixture
def word():
    return "ab"


def test_plain():
    assert len("abc") == 3


if PY3:
    def test_b():
        assert b"a" + b"b" == b"ab"
else:
    def test_b():
        assert "a" + "b" == "ab"

if not PY3:
    def test_py2_only():
        assert 1 == 1


@pytest.mark.usefixtures("word")
def test_uses_fixture():
    assert "x" * 2 == "xx"


def test_helper(n=2):
    assert n * 2 == 4


def test_calls_helper():
    test_helper(n=2)


class TestOrder:
    def test_first(self):
        assert [1, 2][0] == 1

    if PY3:
        def test_roundtrip(self):
            assert list(reversed([1, 2])) == [2, 1]
"""


def test_tests_under_if_blocks_and_usefixtures_are_real_tests():
    h = harden_suite({"tests/test_styles.py": STYLES})[0]["tests/test_styles.py"]
    names = sorted(h.origin.values())
    assert names == [
        "TestOrder::test_first", "TestOrder::test_roundtrip",
        "test_b", "test_calls_helper", "test_helper", "test_plain", "test_py2_only",
        "test_uses_fixture",
    ]  # fmt: skip
    fresh = {v: k for k, v in h.origin.items()}
    # only tests not bound on every path may be missing from a run (both branches define test_b)
    assert h.conditional == {fresh["test_py2_only"], fresh["TestOrder::test_roundtrip"]}
    # test_b is defined twice: a passed run must have recorded one definition's sealed asserts
    assert len(h.either[fresh["test_b"]]) == 2
    for original in ("test_b", "test_py2_only", "test_uses_fixture", "test_roundtrip"):
        assert f"def {original}(" not in h.source  # renamed in every branch
    # the fixture keeps its name; the helper test is called under its fresh name
    assert "def word(" in h.source and f"    {fresh['test_helper']}(n=2)" in h.source
    # canaries come only from unconditional definitions (a canary must always be collected)
    assert h.canaries and not {c.split("::")[-1] for c in h.canaries} & set(h.origin)


IMPORTED = {
    "tests/__init__.py": "",
    "tests/py3_helpers.py": "def test_imported():\n    assert sum([2, 2]) == 4\n",
    "tests/test_imports.py": (
        "import sys\n\n\ndef test_own():\n    assert len([1]) == 1\n\n\n"
        "if sys.version_info >= (3,):\n    from .py3_helpers import test_imported  # noqa\n"
    ),
}


def test_a_test_imported_from_a_helper_module_is_a_real_test():
    layout, support = harden_suite(IMPORTED)
    h = layout["tests/test_imports.py"]
    fresh = {v: k for k, v in h.origin.items()}
    assert sorted(fresh) == ["test_imported", "test_own"]
    assert f"from .py3_helpers import {fresh['test_imported']}" in h.source
    helper = support["tests/py3_helpers.py"]
    assert f"def {fresh['test_imported']}(" in helper and "== 4" not in helper  # sealed
    assert h.conditional == {fresh["test_imported"]}  # imported under an `if`


def test_drop_tests_reaches_tests_under_if():
    keys = {k for k, _ in iter_tests(__import__("ast").parse(STYLES))}
    assert {"test_b", "test_py2_only", "TestOrder::test_roundtrip"} <= keys
    out = drop_tests(STYLES, {"test_b", "TestOrder::test_roundtrip"})
    assert "def test_b" not in out and "def test_roundtrip" not in out and "test_first" in out
    compile(out, "t.py", "exec")  # emptied `if` bodies keep a `pass`


def test_six_style_suite_grades_whole_and_a_foreign_test_is_still_unknown(tmp_path):
    task = Task("styles", "", {"README": "x\n"}, {"tests/test_styles.py": STYLES}, {})
    with Sandbox.from_files(task.files) as box:
        grade = grade_in(box, task, timeout_s=60)
    # every test ran and passed but test_py2_only, absent on Python 3: failed, not tampering
    assert not grade.tampered, grade.output
    assert (grade.passed, grade.total) == (7, 8), grade.output
    assert dict(grade.results)["tests/test_styles.py::test_py2_only"] is False
    task = Task("imports", "", {"README": "x\n"}, IMPORTED, {})
    with Sandbox.from_files(task.files) as box:
        grade = grade_in(box, task, timeout_s=60)
    assert (grade.passed, grade.total, grade.tampered) == (2, 2, False), grade.output
    # fail closed still: a test brought in from outside the suite's files is an unknown id
    extra = STYLES + "\nfrom helpers_outside import test_foreign  # noqa\n"
    files = {"README": "x\n", "helpers_outside.py": "def test_foreign():\n    pass\n"}
    task = Task("styles2", "", files, {"tests/test_styles.py": extra}, {})
    with Sandbox.from_files(task.files) as box:
        grade = grade_in(box, task, timeout_s=60)
    assert grade.tampered and "do not exist" in grade.output, grade.output

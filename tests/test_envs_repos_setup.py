"""Setup-agent and gate fixes from the 28 projects tried (issue 50): each case was a rejection of a
project as shipped (bench/RESULTS.md "Real repositories at scale") and fails before its fix.

- munch: tox's command is a factor expression (`{py27,py36}-full: coverage run -m pytest`);
- voluptuous: a config's `-v` made --collect-only list every test, the observation was trimmed to
  fit and a fragment ("s/tests.py") became a proposed test file;
- first: --doctest-modules collected the project's module (first.py), graded as test_first.py
  over the real test_first.py;
- decorator: tests in src/tests/test.py (a name `add` did not recognize);
- funcy, iso8601, mccabe, toposort: test modules that do not import here (a test dependency not
  installed offline, unittest.main() at import) were rejected as "1 error in X.XXs"; now the
  other modules run, and the reason names the file and the missing module;
- toposort: its one test module ends with a bare unittest.main(), which aborts pytest's collection:
  now it runs as `python3 -m test.test_toposort` and is graded with the call guarded;
- webencodings: webencodings/tests.py imports the package relatively (`from . import lookup`):
  graded from a copy beside the hidden tests, the package's own __init__.py was installed there
  and its imports failed (and a fix the agent made to it would not have counted)."""

import ast

import pytest

from data.tokenizers import ByteTokenizer
from rl.envs.isolation.sandbox import Sandbox
from rl.envs.repos import setup as S
from rl.envs.repos.add import AddError, check_files
from rl.envs.repos.setup import repair, setup_repo, tox_commands, why_not_run
from rl.envs.repos.spec import EnvSpec, admit, graded_source, run_baseline, support_files

PYTEST = "python3 -m pytest -q"
MUNCH_TOX = """\
[tox]
envlist = {py27,py36}-full, lint

[testenv]
commands =
    {py27,py36}-full: coverage run --source=munch -m pytest {posargs}
    {py27,py36}-no-deps: pytest -k 'not yaml'

[testenv:lint]
commands = pylint munch
"""


def test_tox_factor_expressions_and_continuations_are_read():
    assert tox_commands(MUNCH_TOX) == [
        "coverage run --source=munch -m pytest",
        "pytest -k 'not yaml'",
    ]
    assert S.test_commands({"tox.ini": MUNCH_TOX}) == [(PYTEST, "tox.ini runs pytest")]
    voluptuous = "[testenv]\ncommands =\n    pytest \\\n        --cov=v \\\n        v/tests/\n"
    assert tox_commands(voluptuous) == ["pytest --cov=v v/tests/"]
    first = "[testenv]\ncommands=python -m pytest --doctest-modules --ignore=setup.py\n"
    assert S.test_commands({"tox.ini": first})[0][0] == first.split("=", 1)[1].strip()


def test_tests_named_test_py_are_tests_to_add():
    check_files("decorator", {"src/decorator.py": "", "src/tests/test.py": ""})  # no error
    with pytest.raises(AddError, match="has no tests"):
        check_files("lib", {"lib/core.py": "", "lib/contest.txt": ""})


PKG = {
    "pkg/__init__.py": "from .core import double\n",
    "pkg/core.py": 'def double(x):\n    """>>> double(2)\n    4\n    """\n    return 2 * x\n',
    "pkg/tests.py": (
        "import pytest\n\nfrom . import double\nfrom .core import double as twice\n\n\n"
        '@pytest.mark.parametrize("n", range(300))\ndef test_double(n):\n'
        "    assert double(n) == n + n\n\n\n"
        "def test_two():\n    assert twice(2) == 4\n"
    ),
    "tests/__init__.py": "",
    "tests/test_x.py": "from . import helper\n",
}


def test_an_in_package_test_file_imports_the_package_under_test():
    out = graded_source("pkg/tests.py", PKG)
    assert "from pkg import double\nfrom pkg.core import double as twice\n" in out
    assert out.count("\n") == PKG["pkg/tests.py"].count("\n")  # line numbers kept
    assert graded_source("tests/test_x.py", PKG) == PKG["tests/test_x.py"]  # a tests package
    # the package's own __init__.py is code under test, a tests package's is support
    assert "pkg/__init__.py" not in support_files(PKG, ["pkg/tests.py"])
    assert "tests/__init__.py" in support_files(PKG, ["tests/test_x.py"])


CPYTHON_STYLE = {  # contextlib2's layout: a `test` package (the stdlib's name) with test/support/
    "mod.py": "def f():\n    return 2\n",
    "test/__init__.py": "",
    "test/support/__init__.py": "TWO = 2\n",
    "test/support/os_helper.py": "def two():\n    return 2\n",
    "test/test_mod.py": "import unittest\n\nfrom mod import f\nfrom test import support\n"
    "from test.support import os_helper\n\n\nclass ModTests(unittest.TestCase):\n"
    "    def test_f(self):\n        self.assertEqual(f(), support.TWO)\n\n"
    "    def test_helper(self):\n        self.assertEqual(f(), os_helper.two())\n",
}


@pytest.mark.needs_bwrap
def test_a_helper_package_inside_the_test_directory_is_graded_beside_the_tests():
    support = support_files(CPYTHON_STYLE, ["test/test_mod.py"])
    assert {"test/support/__init__.py", "test/support/os_helper.py"} <= set(support)
    spec = EnvSpec("cstyle", [], PYTEST, ["test/test_mod.py"])
    with Sandbox.from_files(CPYTHON_STYLE) as box:
        grade, _ = run_baseline(box, CPYTHON_STYLE, spec)
    assert not grade.tampered and dict(grade.results) == {
        "test/test_mod.py::ModTests::test_f": True,
        "test/test_mod.py::ModTests::test_helper": True,
    }, grade.output


def test_two_test_files_graded_under_one_name_are_refused():
    files = {"first.py": "X = 1\n", "test_first.py": "def test_a():\n    pass\n"}
    spec = EnvSpec("first", [], PYTEST, ["first.py", "test_first.py"])
    admission = admit(files, spec)
    assert not admission.admitted
    assert "first.py and test_first.py would both be graded as test_first.py" in admission.reason


@pytest.mark.long  # ~30 s at load 6 (setup runs + two graded baselines); fast siblings above
def test_the_setup_agent_admits_an_in_package_suite_with_doctests_and_a_tox_factor():
    files = dict(PKG)
    del files["tests/__init__.py"], files["tests/test_x.py"]
    files["tox.ini"] = MUNCH_TOX
    # -v lists all 301 tests on --collect-only: more than an observation holds
    files["pyproject.toml"] = (
        '[tool.pytest.ini_options]\npython_files = "tests.py"\naddopts = "-v --doctest-modules"\n'
    )
    admission = setup_repo("pkg", files, ByteTokenizer())
    assert admission.admitted, admission.reason
    spec = admission.spec
    assert spec.test_command == PYTEST and spec.test_files == ["pkg/tests.py"]
    assert "not graded: ['pkg/core.py'] (no test functions or classes: doctests only)" in (
        spec.notes
    )
    assert not any(n.startswith("problem: ") for n in spec.notes), spec.notes
    assert spec.baseline == {
        "pkg/test_tests.py::test_double": True,
        "pkg/test_tests.py::test_two": True,
    }


COLLECTION_ERROR = """[exit:2] exit_code=2
==================================== ERRORS ====================================
___________________ ERROR collecting tests/test_colls.py ___________________
E   ModuleNotFoundError: No module named 'whatever'
=========================== short test summary info ============================
ERROR tests/test_colls.py - ModuleNotFoundError: No module named 'whatever'
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.52s
"""


def test_modules_that_do_not_import_are_left_out_with_the_reason():
    files = ["funcy/__init__.py", "tests/test_colls.py", "tests/test_calc.py"]
    command, note = repair(PYTEST, COLLECTION_ERROR, files)
    assert command == PYTEST + " --ignore=tests/test_colls.py"
    assert "left out test modules that do not import here: ['tests/test_colls.py']" in note
    assert "the tests import whatever, which is not installed here" in note
    assert repair(command, COLLECTION_ERROR, files) is None  # once only
    exits = "[exit:5] exit_code=5\nmainloop: caught unexpected SystemExit!\n\nno tests ran\n"
    assert "unittest.main() outside `if __name__ == '__main__':`" in why_not_run(exits)
    mccabe = COLLECTION_ERROR.replace(
        "ModuleNotFoundError: No module named 'whatever'", "NameError"
    )
    assert why_not_run(mccabe).startswith("tests/test_colls.py: NameError")


# toposort 1.10: its one test module ends with a bare `unittest.main()`; pytest's collection runs
# it on pytest's argv and aborts (INTERNALERROR, "caught unexpected SystemExit").
TOPOSORT_ABORT = """[exit:3] exit_code=3
INTERNALERROR>   File "/repo/test/test_sort.py", line 12, in <module>
INTERNALERROR>     unittest.main()
INTERNALERROR>   File "/usr/lib/python3.11/unittest/main.py", line 276, in runTests
INTERNALERROR>     sys.exit(not self.result.wasSuccessful())
INTERNALERROR> SystemExit: False
mainloop: caught unexpected SystemExit!

no tests ran in 0.06s
"""
MAIN_AT_IMPORT = {
    "sort.py": "def double(x):\n    return 2 * x\n",
    "test/__init__.py": "",
    "test/test_sort.py": (
        "import unittest\n\nfrom sort import double\n\n\nclass Case(unittest.TestCase):\n"
        "    def test_double(self):\n        self.assertEqual(double(2), 4)\n\n"
        "    def test_zero(self):\n        self.assertEqual(double(0), 0)\n\n\nunittest.main()\n"
    ),
}


def test_a_module_calling_unittest_main_at_import_runs_as_a_script_and_is_graded_guarded():
    from rl.envs.grading.harden import harden_module

    files = ["sort.py", "test/__init__.py", "test/test_sort.py"]
    assert S.main_at_import(TOPOSORT_ABORT, files) == ["test/test_sort.py"]
    assert S.main_at_import(TOPOSORT_ABORT.replace("unittest.main()", "run()"), files) == []
    policy = S.ScriptedSetupPolicy(ByteTokenizer())
    command, note = policy._run_main_modules(PYTEST, TOPOSORT_ABORT, files)
    assert command == PYTEST + " --ignore=test/test_sort.py" and "unittest.main()" in note
    nothing = "[exit:5] exit_code=5\n\nno tests ran in 0.01s\n"
    assert policy._run_main_modules(command, nothing, files)[0] == "python3 -m test.test_sort"
    assert S.tests_ran("[ok] exit_code=0\n..\n----\nRan 2 tests in 0.001s\n\nOK\n")
    assert not S.tests_ran("[ok] exit_code=0\n\n----\nRan 0 tests in 0.000s\n\nOK\n")
    # the graded copy: the call runs only when the file is a script, never at import
    source = harden_module(MAIN_AT_IMPORT["test/test_sort.py"]).source
    tree = ast.parse(source)
    guard = tree.body[-1]
    assert isinstance(guard, ast.If) and ast.unparse(guard) == (
        "if __name__ == '__main__':\n    unittest.main()"
    )
    assert source.count("unittest.main()") == 1


@pytest.mark.long  # ~15 s at load 4 (setup runs + two graded baselines); fast sibling above
def test_the_setup_agent_admits_a_module_that_calls_unittest_main_at_import():
    admission = setup_repo("sort", MAIN_AT_IMPORT, ByteTokenizer())
    assert admission.admitted, admission.reason
    spec = admission.spec
    assert spec.test_command == "python3 -m test.test_sort"
    assert spec.test_files == ["test/test_sort.py"]
    assert spec.baseline == {
        "test/test_sort.py::Case::test_double": True,
        "test/test_sort.py::Case::test_zero": True,
    }

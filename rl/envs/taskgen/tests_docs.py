"""Writing tests (graded by mutants) and docs (docstrings; README doctests) templates."""

from __future__ import annotations

from rl.envs.taskgen.feature import FEATURES
from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt

_VERSION_IMPL = '''
def parse_version(s):
    """'1.2.3' -> (1, 2, 3); a missing patch counts as 0; a leading 'v' is allowed."""
    s = s.strip()
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise ValueError(f"bad version {s!r}")
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return tuple(nums)
'''
_VERSION_MUTANTS = (
    ('if s.startswith("v"):', 'if s.startswith("V"):'),
    ("[0] * (3 - len(parts))", "[1] * (3 - len(parts))"),
    ("len(parts) not in (2, 3)", "len(parts) not in (1, 2, 3)"),
    ("return tuple(nums)", "return tuple(reversed(nums))"),
)


def _suite_grader(target: str, test_file: str, mutants, min_tests: int) -> str:
    """Hidden tests that grade a test suite the agent wrote: it must exist with >= min_tests tests,
    pass on the real code and on a rewrite of it with the same behaviour, and fail (by failing
    tests) on each mutant of `target`, itself rewritten the same way. The rewrite changes the
    file's bytes, text and bytecode, so a suite that pins the target's hash or source text instead
    of testing behaviour fails on correct code; and since every mutant is rewritten too, "was the
    file rewritten?" tells the suite nothing. A suite that fails on correct code, or catches no
    mutant, earns nothing."""
    return dedent(f'''
        import ast
        import base64
        import pathlib
        import secrets
        import shutil
        import subprocess
        import sys
        import zlib

        import pytest

        TEST_FILE = pathlib.Path("{test_file}")
        MUTANTS = {list(mutants)!r}


        def _equivalent(src):
            # Same behaviour, other bytes, text and bytecode: a dead local first in every function
            # (after its docstring), then the module runs from a compressed blob of that source.
            tag = secrets.token_hex(4)
            tree = ast.parse(src)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    dead = ast.parse(f"_unused_{{tag}} = {{secrets.randbelow(1 << 30)}}").body[0]
                    node.body.insert(0 if ast.get_docstring(node) is None else 1, dead)
            blob = zlib.compress(ast.unparse(ast.fix_missing_locations(tree)).encode())
            load = "__import__('zlib').decompress(__import__('base64').b64decode({{!r}})).decode()"
            code = load.format(base64.b64encode(blob).decode())
            return f"# rewritten {{tag}}\\nexec(compile({{code}}, __file__, 'exec'))\\n"


        def _run_suite(tmp_path, mutant=None, rewrite=False):
            copy = tmp_path / "repo"
            shutil.copytree(".", copy, ignore=shutil.ignore_patterns(".hidden_tests", "*.xml"))
            target = copy / "{target}"
            src = target.read_text()
            if mutant:
                assert mutant[0] in src
                target.write_text(_equivalent(src.replace(mutant[0], mutant[1])))
            elif rewrite:
                target.write_text(_equivalent(src))
            return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   str(TEST_FILE)], cwd=copy, capture_output=True).returncode


        @pytest.fixture(scope="module")
        def passes_on_real_code(tmp_path_factory):
            return (
                _run_suite(tmp_path_factory.mktemp("real")) == 0
                and _run_suite(tmp_path_factory.mktemp("rewritten"), rewrite=True) == 0
            )


        @pytest.fixture(scope="module")
        def mutant_exits(tmp_path_factory, passes_on_real_code):
            # The suite's exit code on each mutant. Only a suite that passes on the real code gets
            # credit for failing on a mutant, and only by failing tests (exit 1), not by crashing
            # (2), having no tests (5) or no file (4).
            if not passes_on_real_code:
                return [None] * len(MUTANTS)
            return [_run_suite(tmp_path_factory.mktemp("mutant"), m) for m in MUTANTS]


        @pytest.fixture(scope="module")
        def suite_is_useful(passes_on_real_code, mutant_exits):
            # A suite that passes on correct code but catches no mutant (empty tests, or tests
            # that stand down on a rewritten file) tests nothing: it earns no credit at all.
            return passes_on_real_code and 1 in mutant_exits


        def test_file_exists_with_tests(suite_is_useful):
            assert TEST_FILE.exists()
            assert TEST_FILE.read_text().count("def test_") >= {min_tests}
            assert suite_is_useful


        def test_passes_on_real_code(suite_is_useful):
            assert suite_is_useful
        ''') + "".join(
        # One test function per mutant (not one parametrized test): the grade counts each test
        # function once, and suites that catch more mutants must earn more.
        f"\n\ndef test_catches_mutant_{i}(mutant_exits):\n    assert mutant_exits[{i}] == 1\n"
        for i in range(len(mutants))
    )


def write_tests(rng, pkg, difficulty):
    files = base_repo(rng, pkg, difficulty)
    files[f"{pkg}/version.py"] = dedent(_VERSION_IMPL)
    mutants = rng.sample(_VERSION_MUTANTS, min(difficulty + 1, len(_VERSION_MUTANTS)))
    hidden = {
        "test_written_tests_hidden.py": _suite_grader(
            f"{pkg}/version.py", "tests/test_version.py", mutants, min_tests=2
        )
    }
    solution = {
        "tests/test_version.py": dedent(f"""
        import pytest

        from {pkg}.version import parse_version


        def test_full():
            assert parse_version("1.2.3") == (1, 2, 3)


        def test_prefix_and_missing_patch():
            assert parse_version(" v4.5 ") == (4, 5, 0)


        @pytest.mark.parametrize("bad", ["1", "1.x", "1.2.3.4"])
        def test_rejects(bad):
            with pytest.raises(ValueError):
                parse_version(bad)
        """)
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"add tests for parse_version ({pkg}/version.py) in tests/test_version.py",
            "parse_version has no tests, add tests/test_version.py",
            "write tests for parse_version in tests/test_version.py",
        ),
    )
    return files, prompt, hidden, solution


def docstrings(rng, pkg, difficulty):
    names = rng.sample(
        (
            ("net_price", "gross, rate"),
            ("split_evenly", "total, parts"),
            ("round_cents", "amount"),
            ("fee_for", "amount, tier"),
        ),
        1 + difficulty,
    )
    bodies = {
        "net_price": "return gross * (1 - rate)",
        "split_evenly": "return [total / parts] * parts",
        "round_cents": "return round(amount, 2)",
        "fee_for": "return amount * 0.01 * tier",
    }
    plain, documented = [], []
    for name, args in names:
        plain.append(f"def {name}({args}):\n    {bodies[name]}\n")
        arg_doc = "\n".join(f"        {a}: the {a} value." for a in args.split(", "))
        documented.append(
            f'def {name}({args}):\n    """{name.replace("_", " ").capitalize()}.\n\n'
            f'    Args:\n{arg_doc}\n\n    Returns:\n        The result.\n    """\n'
            f"    {bodies[name]}\n"
        )
    files = base_repo(rng, pkg, difficulty)
    files[f"{pkg}/money.py"] = "\n\n".join(plain)
    hidden = {
        "test_docs_hidden.py": dedent(f"""
        import inspect

        from {pkg} import money


        def test_every_public_function_documented():
            fns = [f for n, f in inspect.getmembers(money, inspect.isfunction) if not n.startswith("_")]
            assert len(fns) == {len(names)}
            for fn in fns:
                doc = inspect.getdoc(fn) or ""
                assert doc, fn.__name__
                for arg in inspect.signature(fn).parameters:
                    assert arg in doc, (fn.__name__, arg)
                assert "return" in doc.lower(), fn.__name__


        def test_behaviour_kept():
            assert money.{names[0][0]}(*[{", ".join("2" for _ in names[0][1].split(", "))}]) is not None
        """)  # noqa: E501
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"document every function in {pkg}/money.py (args and return value)",
            "money.py has no docstrings; add them (args + returns)",
            "document money.py",
        ),
    )
    return files, prompt, hidden, {f"{pkg}/money.py": "\n\n".join(documented)}


def regression_test(rng, pkg, difficulty):
    fn = rng.choice(("window_sums", "rolling_totals", "block_sums"))
    files = base_repo(rng, pkg, difficulty)
    fixed = dedent(f'''
        def {fn}(xs, k):
            """Sum of every length-k window of xs, left to right."""
            return [sum(xs[i:i + k]) for i in range(len(xs) - k + 1)]
        ''')
    files[f"{pkg}/series.py"] = fixed
    test_file = "tests/test_windows.py"
    bug = ("range(len(xs) - k + 1)", "range(len(xs) - k)")
    hidden = {
        "test_regression_hidden.py": _suite_grader(
            f"{pkg}/series.py", test_file, [bug], min_tests=1
        )
    }
    solution = {
        test_file: dedent(f"""
        from {pkg}.series import {fn}


        def test_last_window_kept():
            assert {fn}([1, 2, 3], 2) == [3, 5]
        """)
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"{fn} ({pkg}/series.py) used to drop the last window; add a regression test in "
            f"{test_file}",
            f"add a regression test for the {fn} last-window bug ({test_file})",
            f"we fixed a last-window bug in {fn}; pin it with a test in {test_file}",
        ),
    )
    return files, prompt, hidden, solution


def readme_example(rng, pkg, difficulty):
    name = rng.choice(sorted(FEATURES))
    signature, spec, impl, _ = FEATURES[name]
    call, result = EXAMPLES[name]
    files = base_repo(rng, pkg, difficulty)
    files[f"{pkg}/text.py"] = dedent(impl)
    readme = files["README.md"]
    hidden = {
        "test_readme_hidden.py": dedent(f'''
        import doctest
        import pathlib


        def test_readme_has_a_running_example_of_{name}():
            text = pathlib.Path("README.md").read_text()
            examples = doctest.DocTestParser().get_examples(text)
            assert any("{name}(" in ex.source for ex in examples)
            result = doctest.testfile("README.md", module_relative=False)
            assert result.attempted >= 2 and result.failed == 0


        def test_readme_keeps_its_intro():
            assert pathlib.Path("README.md").read_text().startswith({readme.splitlines()[0]!r})
        ''')
    }
    example = (
        f"\n## Example\n\n```python\n>>> from {pkg}.text import {name}\n"
        f">>> {call}\n{result}\n\n```\n"
    )
    prompt = pick_prompt(
        difficulty,
        (
            f"add a doctest-style usage example of {name} to README.md",
            f"README needs a runnable {name} example (doctest)",
            f"document {name} in the README with a doctest",
        ),
    )
    return files, prompt, hidden, {"README.md": readme + example}


EXAMPLES = {
    "slugify": ('slugify("Hello, World!")', "'hello-world'"),
    "chunked": ("chunked([1, 2, 3], 2)", "[[1, 2], [3]]"),
    "rle_encode": ('rle_encode("aab")', "[('a', 2), ('b', 1)]"),
}

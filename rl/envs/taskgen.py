"""Procedural Python coding tasks, reproducible by (template, seed, difficulty).

Kinds and templates (the kinds the Composer report names):
    bugfix    off_by_one, boundary, mutable_default
    feature   add_function, add_option
    refactor  rename, extract_helper
    tests     write_tests, regression_test
    docs      docstrings, readme_example
    migration api_migration

Difficulty 1..3 makes the prompt vaguer (d1 names the file and symptom, d3 only the symptom) and
the repo bigger (d-1 distractor modules; more callers for rename/migration; more mutants for
write_tests). Names and constants are drawn from `random.Random` seeded by the arguments only, so
the same arguments give byte-identical tasks. Each template returns the repo, a terse prompt, hidden
tests and the reference solution as whole-file edits; the verification gate checks them all.
"""
from __future__ import annotations

import random
import textwrap
from typing import Callable

from rl.envs.tasks import Task

PACKAGES = ("ledger", "shipping", "catalog", "metrics", "billing", "orders", "inventory", "payroll")


def _d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _base_repo(rng: random.Random, pkg: str, difficulty: int) -> dict[str, str]:
    files = {f"{pkg}/__init__.py": "", "README.md": f"# {pkg}\n\nInternal helpers. Run `python3 -m pytest -q`.\n"}
    for i in range(difficulty - 1):
        a = rng.randint(2, 9)
        files[f"{pkg}/util_{i}.py"] = _d(f'''
            def scale_{i}(x):
                return x * {a}


            def label_{i}(name):
                return "{pkg}-" + str(name).lower()
            ''')
    return files


def _prompt(difficulty: int, options: tuple[str, str, str]) -> str:
    return options[min(max(difficulty, 1), 3) - 1]


# ---------------------------------------------------------------- bug fixes

def _off_by_one(rng, pkg, difficulty):
    fn = rng.choice(("window_sums", "rolling_totals", "block_sums"))
    files = _base_repo(rng, pkg, difficulty)
    body = _d(f'''
        def {fn}(xs, k):
            """Sum of every length-k window of xs, left to right."""
            return [sum(xs[i:i + k]) for i in range(len(xs) - k{{}})]


        def running_max(xs):
            out, best = [], None
            for x in xs:
                best = x if best is None or x > best else best
                out.append(best)
            return out
        ''')
    files[f"{pkg}/series.py"] = body.format("")
    files["tests/test_series.py"] = _d(f'''
        from {pkg}.series import running_max


        def test_running_max():
            assert running_max([1, 3, 2]) == [1, 3, 3]
        ''')
    hidden = {"test_series_hidden.py": _d(f'''
        from {pkg}.series import {fn}, running_max


        def test_windows():
            assert {fn}([1, 2, 3, 4], 2) == [3, 5, 7]


        def test_single_window():
            assert {fn}([5, 6], 2) == [11]


        def test_k1():
            assert {fn}([4, 1], 1) == [4, 1]


        def test_running_max_kept():
            assert running_max([2, 1, 5]) == [2, 2, 5]
        ''')}
    solution = {f"{pkg}/series.py": body.format(" + 1")}
    prompt = _prompt(difficulty, (f"{fn} in {pkg}/series.py drops the last window. fix it",
                                  f"{fn} is missing the last window", "rolling sums come out one short, fix"))
    return files, prompt, hidden, solution


def _boundary(rng, pkg, difficulty):
    threshold, pct = rng.choice((10, 12, 20, 25, 50)), rng.choice((5, 10, 15, 20))
    files = _base_repo(rng, pkg, difficulty)
    body = _d(f'''
        BULK_THRESHOLD = {threshold}
        BULK_DISCOUNT_PCT = {pct}


        def order_total(qty, unit_cents):
            """Total in cents; orders of BULK_THRESHOLD items or more get the bulk discount."""
            total = qty * unit_cents
            if qty {{}} BULK_THRESHOLD:
                total = total * (100 - BULK_DISCOUNT_PCT) // 100
            return total
        ''')
    files[f"{pkg}/pricing.py"] = body.format(">")
    files["tests/test_pricing.py"] = _d(f'''
        from {pkg}.pricing import order_total


        def test_small_order():
            assert order_total(1, 100) == 100
        ''')
    t = threshold
    hidden = {"test_pricing_hidden.py": _d(f'''
        from {pkg}.pricing import order_total


        def test_at_threshold_gets_discount():
            assert order_total({t}, 100) == {t} * 100 * {100 - pct} // 100


        def test_above_threshold():
            assert order_total({t + 1}, 100) == {t + 1} * 100 * {100 - pct} // 100


        def test_below_threshold():
            assert order_total({t - 1}, 100) == {(t - 1) * 100}
        ''')}
    solution = {f"{pkg}/pricing.py": body.format(">=")}
    prompt = _prompt(difficulty, (f"order_total in {pkg}/pricing.py: orders of exactly {t} don't get the bulk discount",
                                  f"ordering exactly {t} items doesn't get the discount",
                                  "bulk discount kicks in one item late"))
    return files, prompt, hidden, solution


def _mutable_default(rng, pkg, difficulty):
    fn = rng.choice(("add_tag", "tag_item", "with_label"))
    files = _base_repo(rng, pkg, difficulty)
    buggy = _d(f'''
        def {fn}(name, tags=[]):
            """Returns the tag list for `name` with `name` appended."""
            tags.append(name)
            return tags
        ''')
    fixed = _d(f'''
        def {fn}(name, tags=None):
            """Returns the tag list for `name` with `name` appended."""
            tags = [] if tags is None else tags
            tags.append(name)
            return tags
        ''')
    files[f"{pkg}/tags.py"] = buggy
    hidden = {"test_tags_hidden.py": _d(f'''
        from {pkg}.tags import {fn}


        def test_independent_calls():
            assert {fn}("a") == ["a"]
            assert {fn}("b") == ["b"]


        def test_explicit_list_extended():
            xs = ["x"]
            assert {fn}("y", xs) == ["x", "y"]
        ''')}
    prompt = _prompt(difficulty, (f"{fn} in {pkg}/tags.py leaks tags between calls",
                                  f"{fn} remembers tags from earlier calls", "tags leak between items"))
    return files, prompt, hidden, {f"{pkg}/tags.py": fixed}


# ---------------------------------------------------------------- features

_FEATURES = {
    "slugify": ("slugify(text)", "lowercase, words joined by '-', drop anything not a-z0-9",
                '''
                import re


                def slugify(text):
                    words = re.findall(r"[a-z0-9]+", text.lower())
                    return "-".join(words)
                ''',
                '''
                def test_basic():
                    assert slugify("Hello World") == "hello-world"


                def test_punctuation():
                    assert slugify("  A, b!! C ") == "a-b-c"


                def test_empty():
                    assert slugify("") == ""
                '''),
    "chunked": ("chunked(xs, n)", "split a list into lists of n (last may be shorter)",
                '''
                def chunked(xs, n):
                    if n < 1:
                        raise ValueError("n must be >= 1")
                    return [list(xs[i:i + n]) for i in range(0, len(xs), n)]
                ''',
                '''
                import pytest


                def test_even():
                    assert chunked([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


                def test_ragged():
                    assert chunked([1, 2, 3], 2) == [[1, 2], [3]]


                def test_bad_n():
                    with pytest.raises(ValueError):
                        chunked([1], 0)
                '''),
    "rle_encode": ("rle_encode(s)", "run-length encode a string into (char, count) pairs",
                   '''
                   def rle_encode(s):
                       out = []
                       for ch in s:
                           if out and out[-1][0] == ch:
                               out[-1] = (ch, out[-1][1] + 1)
                           else:
                               out.append((ch, 1))
                       return out
                   ''',
                   '''
                   def test_runs():
                       assert rle_encode("aaab") == [("a", 3), ("b", 1)]


                   def test_empty():
                       assert rle_encode("") == []
                   '''),
}


def _add_function(rng, pkg, difficulty):
    name = rng.choice(sorted(_FEATURES))
    signature, spec, impl, tests = _FEATURES[name]
    files = _base_repo(rng, pkg, difficulty)
    existing = _d('''
        def normalize_space(text):
            return " ".join(text.split())
        ''')
    files[f"{pkg}/text.py"] = existing
    hidden = {f"test_{name}_hidden.py": f"from {pkg}.text import {name}\n\n\n" + _d(tests)}
    solution = {f"{pkg}/text.py": existing + "\n\n" + _d(impl)}
    prompt = _prompt(difficulty, (f"add {signature} to {pkg}/text.py: {spec}",
                                  f"need a {name} helper in text.py ({spec})", f"add {signature}: {spec}"))
    return files, prompt, hidden, solution


def _add_option(rng, pkg, difficulty):
    field = rng.choice(("price", "weight", "rank"))
    files = _base_repo(rng, pkg, difficulty)
    old = _d(f'''
        def sort_records(records):
            """Records (dicts) sorted by their "{field}" field, ascending."""
            return sorted(records, key=lambda r: r["{field}"])
        ''')
    new = _d(f'''
        def sort_records(records, reverse=False, limit=None):
            """Records (dicts) sorted by their "{field}" field; optionally descending and truncated."""
            out = sorted(records, key=lambda r: r["{field}"], reverse=reverse)
            return out if limit is None else out[:limit]
        ''')
    files[f"{pkg}/records.py"] = old
    hidden = {"test_records_hidden.py": _d(f'''
        from {pkg}.records import sort_records

        ROWS = [{{"{field}": 3}}, {{"{field}": 1}}, {{"{field}": 2}}]


        def test_default_ascending():
            assert [r["{field}"] for r in sort_records(ROWS)] == [1, 2, 3]


        def test_reverse():
            assert [r["{field}"] for r in sort_records(ROWS, reverse=True)] == [3, 2, 1]


        def test_limit():
            assert [r["{field}"] for r in sort_records(ROWS, reverse=True, limit=2)] == [3, 2]
        ''')}
    prompt = _prompt(difficulty, (f"sort_records in {pkg}/records.py: add reverse=False and limit=None options",
                                  "sort_records needs reverse and limit options", "let sort_records do descending + top-n"))
    return files, prompt, hidden, {f"{pkg}/records.py": new}


# ---------------------------------------------------------------- refactors

def _rename(rng, pkg, difficulty):
    old, new = rng.choice((("calc", "compute_total"), ("do_it", "apply_tax"), ("proc", "process_rows")))
    rate = rng.choice((3, 5, 7))
    files = _base_repo(rng, pkg, difficulty)
    core = _d(f'''
        def {{name}}(amounts):
            return sum(amounts) * (100 + {rate}) // 100
        ''')
    files[f"{pkg}/core.py"] = core.format(name=old)
    solution = {f"{pkg}/core.py": core.format(name=new)}
    callers = []
    for i in range(difficulty):
        caller = _d(f'''
            from {pkg}.core import {{name}}


            def report_{i}(rows):
                return {{name}}([r * {i + 1} for r in rows])
            ''')
        files[f"{pkg}/report_{i}.py"] = caller.format(name=old)
        solution[f"{pkg}/report_{i}.py"] = caller.format(name=new)
        callers.append(i)
    imports = "".join(f"from {pkg} import report_{i}\n" for i in callers)
    checks = "".join(f"    assert report_{i}.report_{i}([100, 200]) == {new}([{(i + 1) * 100}, {(i + 1) * 200}])\n"
                     for i in callers)
    hidden = {"test_rename_hidden.py": (
        f"import pathlib\nimport re\n\nfrom {pkg} import core\nfrom {pkg}.core import {new}\n{imports}\n\n"
        f"def test_behaviour_kept():\n    assert {new}([100, 200]) == 300 * {100 + rate} // 100\n\n\n"
        f"def test_callers():\n{checks}\n\n"
        f"def test_old_name_gone():\n    assert not hasattr(core, {old!r})\n"
        f"    for path in pathlib.Path({pkg!r}).rglob('*.py'):\n"
        f"        assert not re.search(r'\\b{old}\\b', path.read_text()), path   # whole words: proc vs process_rows\n")}
    prompt = _prompt(difficulty, (f"rename {old} to {new} in {pkg}/core.py and update callers",
                                  f"rename {old} -> {new}", f"{old} is a bad name, call it {new}"))
    return files, prompt, hidden, solution


def _extract_helper(rng, pkg, difficulty):
    limit = rng.choice((50, 99, 500))
    helper = "_check_qty"
    files = _base_repo(rng, pkg, difficulty)
    check = _d(f'''
        if not isinstance(qty, int) or isinstance(qty, bool):
            raise TypeError("qty must be an int")
        if qty < 1 or qty > {limit}:
            raise ValueError("qty out of range")
        ''')
    ind = textwrap.indent(check, "    ")
    old = (f"def reserve(stock, qty):\n{ind}    return stock - qty\n\n\n"
           f"def release(stock, qty):\n{ind}    return stock + qty\n")
    new = (f"def {helper}(qty):\n{ind}\n\ndef reserve(stock, qty):\n    {helper}(qty)\n    return stock - qty\n\n\n"
           f"def release(stock, qty):\n    {helper}(qty)\n    return stock + qty\n")
    files[f"{pkg}/stock.py"] = old
    hidden = {"test_stock_hidden.py": _d(f'''
        import inspect

        import pytest

        from {pkg} import stock


        def test_behaviour():
            assert stock.reserve(10, 3) == 7 and stock.release(10, 3) == 13
            for fn in (stock.reserve, stock.release):
                with pytest.raises(ValueError):
                    fn(10, {limit + 1})
                with pytest.raises(TypeError):
                    fn(10, True)


        def test_helper_used():
            assert callable(stock.{helper})
            for fn in (stock.reserve, stock.release):
                src = inspect.getsource(fn)
                assert "{helper}(" in src and "raise" not in src
        ''')}
    prompt = _prompt(difficulty, (f"{pkg}/stock.py: move the duplicated qty validation into {helper}(qty)",
                                  f"dedupe the qty checks in stock.py into {helper}", f"pull the qty checks into {helper}"))
    return files, prompt, hidden, {f"{pkg}/stock.py": new}


# ---------------------------------------------------------------- tests and docs

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
    pass on the real code, and fail (by failing tests) on each mutant of `target`."""
    return _d(f'''
        import pathlib
        import shutil
        import subprocess
        import sys

        import pytest

        TEST_FILE = pathlib.Path("{test_file}")
        MUTANTS = {list(mutants)!r}


        def _run_suite(tmp_path, mutant=None):
            copy = tmp_path / "repo"
            shutil.copytree(".", copy, ignore=shutil.ignore_patterns(".hidden_tests", "*.xml"))
            if mutant:
                target = copy / "{target}"
                src = target.read_text()
                assert mutant[0] in src
                target.write_text(src.replace(mutant[0], mutant[1]))
            return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                   str(TEST_FILE)], cwd=copy, capture_output=True).returncode


        @pytest.fixture(scope="module")
        def passes_on_real_code(tmp_path_factory):
            return _run_suite(tmp_path_factory.mktemp("real")) == 0


        def test_file_exists_with_tests():
            assert TEST_FILE.exists()
            assert TEST_FILE.read_text().count("def test_") >= {min_tests}


        def test_passes_on_real_code(passes_on_real_code):
            assert passes_on_real_code


        @pytest.mark.parametrize("mutant", MUTANTS)
        def test_catches_mutant(tmp_path, passes_on_real_code, mutant):
            # Only a suite that passes on the real code gets credit for failing on a mutant, and only
            # by failing tests (exit 1), not by crashing (2), having no tests (5) or no file (4).
            assert passes_on_real_code
            assert _run_suite(tmp_path, mutant) == 1
        ''')


def _write_tests(rng, pkg, difficulty):
    files = _base_repo(rng, pkg, difficulty)
    files[f"{pkg}/version.py"] = _d(_VERSION_IMPL)
    mutants = rng.sample(_VERSION_MUTANTS, min(difficulty + 1, len(_VERSION_MUTANTS)))
    hidden = {"test_written_tests_hidden.py": _suite_grader(f"{pkg}/version.py", "tests/test_version.py",
                                                            mutants, min_tests=2)}
    solution = {"tests/test_version.py": _d(f'''
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
        ''')}
    prompt = _prompt(difficulty, (f"add tests for parse_version ({pkg}/version.py) in tests/test_version.py",
                                  "parse_version has no tests, add tests/test_version.py",
                                  "write tests for parse_version in tests/test_version.py"))
    return files, prompt, hidden, solution


def _docstrings(rng, pkg, difficulty):
    names = rng.sample((("net_price", "gross, rate"), ("split_evenly", "total, parts"),
                        ("round_cents", "amount"), ("fee_for", "amount, tier")), 1 + difficulty)
    bodies = {"net_price": "return gross * (1 - rate)", "split_evenly": "return [total / parts] * parts",
              "round_cents": "return round(amount, 2)", "fee_for": "return amount * 0.01 * tier"}
    plain, documented = [], []
    for name, args in names:
        plain.append(f"def {name}({args}):\n    {bodies[name]}\n")
        arg_doc = "\n".join(f"        {a}: the {a} value." for a in args.split(", "))
        documented.append(f'def {name}({args}):\n    """{name.replace("_", " ").capitalize()}.\n\n'
                          f'    Args:\n{arg_doc}\n\n    Returns:\n        The result.\n    """\n'
                          f"    {bodies[name]}\n")
    files = _base_repo(rng, pkg, difficulty)
    files[f"{pkg}/money.py"] = "\n\n".join(plain)
    hidden = {"test_docs_hidden.py": _d(f'''
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
        ''')}
    prompt = _prompt(difficulty, (f"document every function in {pkg}/money.py (args and return value)",
                                  "money.py has no docstrings; add them (args + returns)", "document money.py"))
    return files, prompt, hidden, {f"{pkg}/money.py": "\n\n".join(documented)}


def _regression_test(rng, pkg, difficulty):
    fn = rng.choice(("window_sums", "rolling_totals", "block_sums"))
    files = _base_repo(rng, pkg, difficulty)
    fixed = _d(f'''
        def {fn}(xs, k):
            """Sum of every length-k window of xs, left to right."""
            return [sum(xs[i:i + k]) for i in range(len(xs) - k + 1)]
        ''')
    files[f"{pkg}/series.py"] = fixed
    test_file = "tests/test_windows.py"
    bug = ("range(len(xs) - k + 1)", "range(len(xs) - k)")
    hidden = {"test_regression_hidden.py": _suite_grader(f"{pkg}/series.py", test_file, [bug], min_tests=1)}
    solution = {test_file: _d(f'''
        from {pkg}.series import {fn}


        def test_last_window_kept():
            assert {fn}([1, 2, 3], 2) == [3, 5]
        ''')}
    prompt = _prompt(difficulty, (f"{fn} ({pkg}/series.py) used to drop the last window; add a regression test in {test_file}",
                                  f"add a regression test for the {fn} last-window bug ({test_file})",
                                  f"we fixed a last-window bug in {fn}; pin it with a test in {test_file}"))
    return files, prompt, hidden, solution


def _readme_example(rng, pkg, difficulty):
    name = rng.choice(sorted(_FEATURES))
    signature, spec, impl, _ = _FEATURES[name]
    call, result = _EXAMPLES[name]
    files = _base_repo(rng, pkg, difficulty)
    files[f"{pkg}/text.py"] = _d(impl)
    readme = files["README.md"]
    hidden = {"test_readme_hidden.py": _d(f'''
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
        ''')}
    example = (f"\n## Example\n\n```python\n>>> from {pkg}.text import {name}\n>>> {call}\n{result}\n\n```\n")
    prompt = _prompt(difficulty, (f"add a doctest-style usage example of {name} to README.md",
                                  f"README needs a runnable {name} example (doctest)", f"document {name} in the README with a doctest"))
    return files, prompt, hidden, {"README.md": readme + example}


_EXAMPLES = {"slugify": ('slugify("Hello, World!")', "'hello-world'"),
             "chunked": ("chunked([1, 2, 3], 2)", "[[1, 2], [3]]"),
             "rle_encode": ('rle_encode("aab")', "[('a', 2), ('b', 1)]")}


# ---------------------------------------------------------------- API migration

def _api_migration(rng, pkg, difficulty):
    default = rng.choice(("0", "''", "None"))
    files = _base_repo(rng, pkg, difficulty)
    store = _d('''
        class KV:
            def __init__(self, data=None):
                self._data = dict(data or {})

            def fetch(self, key, *, default=None):
                return self._data.get(key, default)
        ''')
    old_get = _d('''
        def get(self, key, default=None):
            """Deprecated: use fetch(key, default=...)."""
            return self.fetch(key, default=default)
        ''')
    files[f"{pkg}/kv.py"] = store + "\n" + textwrap.indent(old_get, "    ")
    solution = {f"{pkg}/kv.py": store}
    checks = []
    for i in range(difficulty + 1):
        key = f"k{i}"
        caller = _d(f'''
            def lookup_{i}(kv):
                return {{call}}
            ''')
        files[f"{pkg}/use_{i}.py"] = caller.format(call=f'kv.get("{key}", {default})')
        solution[f"{pkg}/use_{i}.py"] = caller.format(call=f'kv.fetch("{key}", default={default})')
        checks.append(f"    assert use_{i}.lookup_{i}(KV({{'{key}': 7}})) == 7\n"
                      f"    assert use_{i}.lookup_{i}(KV()) == {default}")
    imports = "\n".join(f"from {pkg} import use_{i}" for i in range(difficulty + 1))
    hidden = {"test_migration_hidden.py": (
        f"import pathlib\n\nfrom {pkg}.kv import KV\n{imports}\n\n\n"
        "def test_callers_behave():\n" + "\n".join(checks) + "\n\n\n"
        "def test_old_api_removed():\n    assert not hasattr(KV, 'get')\n"
        f"    for path in pathlib.Path('{pkg}').rglob('use_*.py'):\n"
        "        assert '.get(' not in path.read_text(), path\n")}
    prompt = _prompt(difficulty, (f"migrate callers from KV.get to KV.fetch ({pkg}/kv.py), then delete get",
                                  "move everything off KV.get onto fetch and drop get", "kill KV.get, use fetch"))
    return files, prompt, hidden, solution


# ---------------------------------------------------------------- registry

TEMPLATES: dict[str, tuple[str, Callable]] = {
    "off_by_one": ("bugfix", _off_by_one),
    "boundary": ("bugfix", _boundary),
    "mutable_default": ("bugfix", _mutable_default),
    "add_function": ("feature", _add_function),
    "add_option": ("feature", _add_option),
    "rename": ("refactor", _rename),
    "extract_helper": ("refactor", _extract_helper),
    "write_tests": ("tests", _write_tests),
    "regression_test": ("tests", _regression_test),
    "docstrings": ("docs", _docstrings),
    "readme_example": ("docs", _readme_example),
    "api_migration": ("migration", _api_migration),
}


def generate_task(template: str, seed: int, difficulty: int = 1) -> Task:
    if template not in TEMPLATES:
        raise ValueError(f"unknown task template {template!r}; known: {', '.join(TEMPLATES)}")
    if difficulty not in (1, 2, 3):
        raise ValueError(f"difficulty must be 1, 2 or 3, got {difficulty!r}")
    kind, make = TEMPLATES[template]
    rng = random.Random(f"{template}:{seed}:{difficulty}")
    pkg = rng.choice(PACKAGES)
    files, prompt, hidden, solution = make(rng, pkg, difficulty)
    return Task(id=f"{template}-s{seed}-d{difficulty}", prompt=prompt, files=files, hidden_tests=hidden,
                solution=solution, kind=kind, difficulty=difficulty, seed=seed,
                meta={"template": template, "package": pkg})


def generate_tasks(n: int, seed: int = 0, difficulties: tuple[int, ...] = (1, 2, 3),
                   templates: tuple[str, ...] | None = None) -> list[Task]:
    """n tasks cycling through templates (so every kind appears), difficulty drawn per task."""
    names = list(templates or TEMPLATES)
    rng = random.Random(seed)
    return [generate_task(names[i % len(names)], seed=rng.randrange(1 << 30), difficulty=rng.choice(difficulties))
            for i in range(n)]

"""Refactor templates (behaviour kept, structure checked): rename across callers, extract a
helper."""

from __future__ import annotations

import textwrap

from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt


def rename(rng, pkg, difficulty):
    old, new = rng.choice(
        (("calc", "compute_total"), ("do_it", "apply_tax"), ("proc", "process_rows"))
    )
    rate = rng.choice((3, 5, 7))
    files = base_repo(rng, pkg, difficulty)
    core = dedent(f"""
        def {{name}}(amounts):
            return sum(amounts) * (100 + {rate}) // 100
        """)
    files[f"{pkg}/core.py"] = core.format(name=old)
    solution = {f"{pkg}/core.py": core.format(name=new)}
    callers = []
    for i in range(difficulty):
        caller = dedent(f"""
            from {pkg}.core import {{name}}


            def report_{i}(rows):
                return {{name}}([r * {i + 1} for r in rows])
            """)
        files[f"{pkg}/report_{i}.py"] = caller.format(name=old)
        solution[f"{pkg}/report_{i}.py"] = caller.format(name=new)
        callers.append(i)
    imports = "".join(f"from {pkg} import report_{i}\n" for i in callers)
    # Expected values as literals (the grader seals them: see rl/envs/grading/harden.py).
    checks = "".join(
        f"    assert report_{i}.report_{i}([100, 200]) == {(i + 1) * 300 * (100 + rate) // 100}\n"
        for i in callers
    )
    hidden = {
        "test_rename_hidden.py": (
            f"import pathlib\nimport re\n\nfrom {pkg} import core\nfrom {pkg}.core import {new}\n"
            f"{imports}\n\n"
            f"def test_behaviour_kept():\n    assert {new}([100, 200]) == 300 * {100 + rate} // "
            "100\n\n\n"
            f"def test_callers():\n{checks}\n\n"
            f"def test_old_name_gone():\n    assert not hasattr(core, {old!r})\n"
            f"    for path in pathlib.Path({pkg!r}).rglob('*.py'):\n"
            f"        assert not re.search(r'\\b{old}\\b', path.read_text()), path   # whole "
            "words: proc vs process_rows\n"
        )
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"rename {old} to {new} in {pkg}/core.py and update callers",
            f"rename {old} -> {new}",
            f"{old} is a bad name, call it {new}",
        ),
    )
    return files, prompt, hidden, solution


def extract_helper(rng, pkg, difficulty):
    limit = rng.choice((50, 99, 500))
    helper = "_check_qty"
    files = base_repo(rng, pkg, difficulty)
    check = dedent(f"""
        if not isinstance(qty, int) or isinstance(qty, bool):
            raise TypeError("qty must be an int")
        if qty < 1 or qty > {limit}:
            raise ValueError("qty out of range")
        """)
    ind = textwrap.indent(check, "    ")
    old = (
        f"def reserve(stock, qty):\n{ind}    return stock - qty\n\n\n"
        f"def release(stock, qty):\n{ind}    return stock + qty\n"
    )
    new = (
        f"def {helper}(qty):\n{ind}\n\ndef reserve(stock, qty):\n    {helper}(qty)\n"
        "    return stock - qty\n\n\n"
        f"def release(stock, qty):\n    {helper}(qty)\n    return stock + qty\n"
    )
    files[f"{pkg}/stock.py"] = old
    hidden = {
        "test_stock_hidden.py": dedent(f'''
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
        ''')
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"{pkg}/stock.py: move the duplicated qty validation into {helper}(qty)",
            f"dedupe the qty checks in stock.py into {helper}",
            f"pull the qty checks into {helper}",
        ),
    )
    return files, prompt, hidden, {f"{pkg}/stock.py": new}

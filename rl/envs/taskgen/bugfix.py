"""Bug-fix templates: off-by-one window, boundary comparison, mutable default argument."""

from __future__ import annotations

from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt


def off_by_one(rng, pkg, difficulty):
    fn = rng.choice(("window_sums", "rolling_totals", "block_sums"))
    files = base_repo(rng, pkg, difficulty)
    body = dedent(f'''
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
    files["tests/test_series.py"] = dedent(f"""
        from {pkg}.series import running_max


        def test_running_max():
            assert running_max([1, 3, 2]) == [1, 3, 3]
        """)
    hidden = {
        "test_series_hidden.py": dedent(f"""
        from {pkg}.series import {fn}, running_max


        def test_windows():
            assert {fn}([1, 2, 3, 4], 2) == [3, 5, 7]


        def test_single_window():
            assert {fn}([5, 6], 2) == [11]


        def test_k1():
            assert {fn}([4, 1], 1) == [4, 1]


        def test_running_max_kept():
            assert running_max([2, 1, 5]) == [2, 2, 5]
        """)
    }
    solution = {f"{pkg}/series.py": body.format(" + 1")}
    prompt = pick_prompt(
        difficulty,
        (
            f"{fn} in {pkg}/series.py drops the last window. fix it",
            f"{fn} is missing the last window",
            "rolling sums come out one short, fix",
        ),
    )
    return files, prompt, hidden, solution


def boundary(rng, pkg, difficulty):
    threshold, pct = rng.choice((10, 12, 20, 25, 50)), rng.choice((5, 10, 15, 20))
    files = base_repo(rng, pkg, difficulty)
    body = dedent(f'''
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
    files["tests/test_pricing.py"] = dedent(f"""
        from {pkg}.pricing import order_total


        def test_small_order():
            assert order_total(1, 100) == 100
        """)
    t = threshold
    hidden = {
        "test_pricing_hidden.py": dedent(f"""
        from {pkg}.pricing import order_total


        def test_at_threshold_gets_discount():
            assert order_total({t}, 100) == {t} * 100 * {100 - pct} // 100


        def test_above_threshold():
            assert order_total({t + 1}, 100) == {t + 1} * 100 * {100 - pct} // 100


        def test_below_threshold():
            assert order_total({t - 1}, 100) == {(t - 1) * 100}
        """)
    }
    solution = {f"{pkg}/pricing.py": body.format(">=")}
    prompt = pick_prompt(
        difficulty,
        (
            f"order_total in {pkg}/pricing.py: orders of exactly {t} don't get the bulk discount",
            f"ordering exactly {t} items doesn't get the discount",
            "bulk discount kicks in one item late",
        ),
    )
    return files, prompt, hidden, solution


def mutable_default(rng, pkg, difficulty):
    fn = rng.choice(("add_tag", "tag_item", "with_label"))
    files = base_repo(rng, pkg, difficulty)
    buggy = dedent(f'''
        def {fn}(name, tags=[]):
            """Returns the tag list for `name` with `name` appended."""
            tags.append(name)
            return tags
        ''')
    fixed = dedent(f'''
        def {fn}(name, tags=None):
            """Returns the tag list for `name` with `name` appended."""
            tags = [] if tags is None else tags
            tags.append(name)
            return tags
        ''')
    files[f"{pkg}/tags.py"] = buggy
    hidden = {
        "test_tags_hidden.py": dedent(f"""
        from {pkg}.tags import {fn}


        def test_independent_calls():
            assert {fn}("a") == ["a"]
            assert {fn}("b") == ["b"]


        def test_explicit_list_extended():
            xs = ["x"]
            assert {fn}("y", xs) == ["x", "y"]
        """)
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"{fn} in {pkg}/tags.py leaks tags between calls",
            f"{fn} remembers tags from earlier calls",
            "tags leak between items",
        ),
    )
    return files, prompt, hidden, {f"{pkg}/tags.py": fixed}

"""Helpers shared by the task templates: names, dedent, a base repo, difficulty-graded prompts."""

from __future__ import annotations

import random
import textwrap

PACKAGES = ("ledger", "shipping", "catalog", "metrics", "billing", "orders", "inventory", "payroll")


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def base_repo(rng: random.Random, pkg: str, difficulty: int) -> dict[str, str]:
    files = {
        f"{pkg}/__init__.py": "",
        "README.md": f"# {pkg}\n\nInternal helpers. Run `python3 -m pytest -q`.\n",
    }
    for i in range(difficulty - 1):
        a = rng.randint(2, 9)
        files[f"{pkg}/util_{i}.py"] = dedent(f'''
            def scale_{i}(x):
                return x * {a}


            def label_{i}(name):
                return "{pkg}-" + str(name).lower()
            ''')
    return files


def pick_prompt(difficulty: int, options: tuple[str, str, str]) -> str:
    return options[min(max(difficulty, 1), 3) - 1]

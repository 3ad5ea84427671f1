"""API-migration template: move callers from a deprecated method to its replacement, delete it."""

from __future__ import annotations

import textwrap

from rl.envs.taskgen.helpers import base_repo, dedent, pick_prompt


def api_migration(rng, pkg, difficulty):
    default = rng.choice(("0", "''", "None"))
    files = base_repo(rng, pkg, difficulty)
    store = dedent("""
        class KV:
            def __init__(self, data=None):
                self._data = dict(data or {})

            def fetch(self, key, *, default=None):
                return self._data.get(key, default)
        """)
    old_get = dedent('''
        def get(self, key, default=None):
            """Deprecated: use fetch(key, default=...)."""
            return self.fetch(key, default=default)
        ''')
    files[f"{pkg}/kv.py"] = store + "\n" + textwrap.indent(old_get, "    ")
    solution = {f"{pkg}/kv.py": store}
    checks = []
    for i in range(difficulty + 1):
        key = f"k{i}"
        caller = dedent(f"""
            def lookup_{i}(kv):
                return {{call}}
            """)
        files[f"{pkg}/use_{i}.py"] = caller.format(call=f'kv.get("{key}", {default})')
        solution[f"{pkg}/use_{i}.py"] = caller.format(call=f'kv.fetch("{key}", default={default})')
        checks.append(
            f"    assert use_{i}.lookup_{i}(KV({{'{key}': 7}})) == 7\n"
            f"    assert use_{i}.lookup_{i}(KV()) == {default}"
        )
    imports = "\n".join(f"from {pkg} import use_{i}" for i in range(difficulty + 1))
    hidden = {
        "test_migration_hidden.py": (
            f"import pathlib\n\nfrom {pkg}.kv import KV\n{imports}\n\n\n"
            "def test_callers_behave():\n" + "\n".join(checks) + "\n\n\n"
            "def test_old_api_removed():\n    assert not hasattr(KV, 'get')\n"
            f"    for path in pathlib.Path('{pkg}').rglob('use_*.py'):\n"
            "        assert '.get(' not in path.read_text(), path\n"
        )
    }
    prompt = pick_prompt(
        difficulty,
        (
            f"migrate callers from KV.get to KV.fetch ({pkg}/kv.py), then delete get",
            "move everything off KV.get onto fetch and drop get",
            "kill KV.get, use fetch",
        ),
    )
    return files, prompt, hidden, solution

"""Imports, from source (ast; nothing is imported): the direction between top-level packages, no
cycle between modules (below), and a sampler process that loads no trainer module (below).

Direction:

    configs -> model <- train <- rl;  data and eval use model (eval may also use train, rl, data)

(an arrow points at what is imported). model/ imports no other project package: not train/, rl/,
data/, eval/, nor configs/ (configs build model configs, not the reverse). No exception: what rl/
and eval/ both need (episode metrics, the pass@k estimator) lives in rl/, below eval/.
"""

import ast
import functools
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("configs", "model", "train", "rl", "data", "eval")
ALLOWED = {  # package -> the other project packages it may import
    "configs": {"model"},
    "model": set(),
    "data": {"model"},
    "train": {"model", "data", "configs"},
    "rl": {"model", "train", "data", "configs"},
    "eval": {"model", "train", "rl", "data", "configs"},
}


def imported_modules(path: str) -> set[str]:
    """Dotted names this file imports (module level and inside functions alike)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def imported_packages(path: str) -> set[str]:
    """Top-level names this file imports."""
    return {m.split(".")[0] for m in imported_modules(path)}


def package_imports(package: str) -> dict[str, set[str]]:
    """{file: project packages it imports} for every .py file under the package."""
    out = {}
    for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                out[os.path.relpath(path, ROOT)] = imported_packages(path) & set(PACKAGES)
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_follow_the_dependency_direction(package):
    bad = {
        f: sorted(used - ALLOWED[package] - {package})
        for f, used in package_imports(package).items()
        if used - ALLOWED[package] - {package}
    }
    assert not bad, f"{package}/ may import only {sorted(ALLOWED[package])}: {bad}"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import os\n\ndef f():\n    from data.tokenizers import X\n    import train.loop\n"
    )
    assert imported_packages(str(src)) == {"os", "data", "train"}


# --- no import cycle between modules -------------------------------------------------------------
#
# The graph: one node per project module (model/ train/ rl/ eval/ data/ configs/ and main.py; the
# vendored third-party code under data/repos/vendor is not ours and is left out), one edge per
# import statement, at module level AND inside functions: a function-level import defers a cycle
# to run time without removing it (rl.learning.loop <-> rl.sampling.sampler_process was one), so
# both count.
# `from pkg import name` is an edge to pkg.name where that is a module, else to pkg. The parent
# packages Python runs on the way (`import a.b.c` runs a/__init__, a/b/__init__) are not edges: a
# package __init__ that re-exports its submodules would otherwise form a "cycle" with each.

GRAPH_DIRS = ("model", "train", "rl", "eval", "data", "configs")
VENDORED = os.path.join(*"data/repos/vendor".split("/"))  # a path string: moves rewrite it


def project_modules(root: str, dirs=GRAPH_DIRS, scripts=("main.py",)) -> dict[str, str]:
    """{dotted module name: file} for every .py file under `dirs` and the top-level `scripts`."""
    out = {}
    for top in dirs:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            rel = os.path.relpath(dirpath, root)
            if rel == VENDORED or rel.startswith(VENDORED + os.sep):
                dirnames[:] = []
                continue
            for name in files:
                if name.endswith(".py"):
                    parts = os.path.relpath(os.path.join(dirpath, name), root)[:-3].split(os.sep)
                    parts = parts[:-1] if parts[-1] == "__init__" else parts
                    out[".".join(parts)] = os.path.join(dirpath, name)
    for script in scripts:
        if os.path.exists(os.path.join(root, script)):
            out[script[:-3]] = os.path.join(root, script)
    return out


def _resolve(name: str, modules) -> str | None:
    """The project module a dotted name lives in (its longest module prefix), or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(module: str, path: str, modules) -> set[str]:
    """The project modules one module imports (the rule above; relative imports resolved)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            # `from pkg import name`: pkg.name where that is a module, else pkg
            names |= {
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            }
    return {_resolve(n, modules) for n in names} - {None, module}


def import_graph(root: str, **kw) -> dict[str, set[str]]:
    """{module: project modules it imports} (the rule above)."""
    modules = project_modules(root, **kw)
    return {m: module_imports(m, path, modules) for m, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


@functools.cache
def project_graph() -> dict[str, set[str]]:
    return import_graph(ROOT)


def test_no_import_cycle_between_modules():
    found = cycles(project_graph())
    assert not found, f"import cycles (module-level and function-level imports): {found}"


def test_the_cycle_check_fails_on_a_planted_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")  # a re-export: no cycle
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import os\nfrom pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .c import f\n")  # relative, module level
    (pkg / "sub" / "c.py").write_text("def f():\n    from pkg import a\n")  # inside a function
    (pkg / "d.py").write_text("from pkg import a\n")  # imports into the cycle, not part of it
    graph = import_graph(str(tmp_path), dirs=("pkg",), scripts=())
    assert graph["pkg.sub.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.sub.c"]]
    (pkg / "sub" / "c.py").write_text("def f():\n    pass\n")  # the cycle removed
    assert cycles(import_graph(str(tmp_path), dirs=("pkg",), scripts=())) == []


# --- a sampler process imports no trainer module -------------------------------------------------
#
# "Trainer modules": what exists only to train, a sampler never runs: the trainer and its step,
# state, optimizer, checkpoint and loss modules (train.trainer, train.step, train.state,
# train.optim, train.checkpoint, train.losses), the RL trainer's side (rl.learning.loop,
# rl.learning.batch_source, rl.learning.grpo, rl.learning.losses), and the third-party libraries
# only they use (optax: optimizers; orbax: train checkpoints). What both sides need from the run
# config lives below both (train/model_config.py, train/sharding.py, rl/sampling/run_config.py),
# so those are allowed.

TRAINER_MODULES = (
    "train.trainer",
    "train.step",
    "train.state",
    "train.optim",
    "train.checkpoint",
    "train.losses",
    "rl.learning.loop",
    "rl.learning.batch_source",
    "rl.learning.grpo",
    "rl.learning.losses",
    "optax",
    "orbax",
)


def test_importing_the_sampler_process_loads_no_trainer_module():
    code = (
        "import sys, rl.sampling.sampler_process\n"
        f"print(sorted(m for m in sys.modules if m.startswith({TRAINER_MODULES!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", (
        f"rl.sampling.sampler_process loads trainer modules: {out.stdout}"
    )


def test_the_sampler_process_reaches_no_trainer_module_even_in_functions():
    graph, seen, todo = (
        project_graph(),
        {"rl.sampling.sampler_process"},
        ["rl.sampling.sampler_process"],
    )
    while todo:
        for m in graph[todo.pop()] - seen:
            seen.add(m)
            todo.append(m)
    assert not {m for m in seen if m.startswith(TRAINER_MODULES)}, sorted(seen)


# --- folders inside rl/ (and inside rl/envs) import downward only --------------------------------
#
# rl/ is layered: each folder may import its own modules and the folders before it in RL_LAYERS,
# never one after it; rl/envs is layered the same way inside. Top-level modules of a layered
# package (its __init__, __main__, rl/envs/traces.py) wire its folders and may import any of them;
# a folder never imports them (that would be upward). A folder missing from the order fails, so a
# new folder is placed on purpose. Imports inside functions count, as for cycles above.

RL_LAYERS = ("episodes", "envs", "stores", "sampling", "learning", "serve")
ENVS_LAYERS = ("isolation", "grading", "agent", "repos", "taskgen")
LAYERED = {"rl": RL_LAYERS, "rl.envs": ENVS_LAYERS}


def _folder(module: str, package: str, modules) -> str | None:
    """The folder (sub-package) of `package` a module lives in; None for the package's top level."""
    rest = module[len(package) + 1 :].split(".") if module != package else []
    head = f"{package}.{rest[0]}" if rest else None
    if head is None or (len(rest) == 1 and not modules[head].endswith("__init__.py")):
        return None
    return rest[0]


def layer_violations(graph, modules, package: str, layers) -> list[str]:
    """'a -> b' for every import from a folder of `package` to a later folder or to the package's
    top level; 'folder x: not in the layer order' for a folder the order does not name."""
    out = []
    inside = [m for m in graph if m == package or m.startswith(package + ".")]
    for m in sorted(inside):
        src = _folder(m, package, modules)
        if src is None:
            continue
        if src not in layers:
            out.append(f"folder {package}.{src}: not in the layer order {layers}")
            continue
        for t in sorted(graph[m]):
            if t != package and not t.startswith(package + "."):
                continue
            dst = _folder(t, package, modules)
            if dst is None or (dst in layers and layers.index(dst) > layers.index(src)):
                out.append(f"{m} -> {t}")
    return sorted(set(out))


@pytest.mark.parametrize("package", sorted(LAYERED))
def test_folders_import_downward_only(package):
    modules = project_modules(ROOT)
    bad = layer_violations(project_graph(), modules, package, LAYERED[package])
    assert not bad, f"{package}/: upward imports (order {LAYERED[package]}): {bad}"


def test_the_layer_check_fails_on_a_planted_upward_import(tmp_path):
    pkg = tmp_path / "pkg"
    for folder in ("low", "high"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("from pkg.high import b\n")  # the top level wires: allowed
    (pkg / "wire.py").write_text("from pkg.low import a\n")
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")  # downward: allowed
    (pkg / "low" / "a.py").write_text("def f():\n    from pkg.high import b\n")  # upward
    (pkg / "low" / "c.py").write_text("import pkg.wire\n")  # a folder importing the top: upward

    def found():
        modules = project_modules(str(tmp_path), dirs=("pkg",), scripts=())
        graph = import_graph(str(tmp_path), dirs=("pkg",), scripts=())
        return layer_violations(graph, modules, "pkg", ("low", "high"))

    assert found() == ["pkg.low.a -> pkg.high.b", "pkg.low.c -> pkg.wire"]
    (pkg / "low" / "a.py").write_text("def f():\n    pass\n")
    (pkg / "low" / "c.py").write_text("")
    assert found() == []
    (pkg / "new").mkdir()
    (pkg / "new" / "d.py").write_text("")
    assert found() == ["folder pkg.new: not in the layer order ('low', 'high')"]


# --- no two modules share a file name unless they are one concept --------------------------------
#
# Pairs that are the same concept on two levels: a layer and its kernel (attention), the training
# and the RL losses, model sharding names and train's batch sharding, a mode and its config
# (realtime, rollout), the two graders' child process and its runner (HumanEval's, the repos').

SAME_CONCEPT = {
    "__init__",
    "__main__",
    "attention",
    "losses",
    "sharding",
    "realtime",
    "rollout",
    "agent",
    "child",
    "runner",
}
NAMED_DIRS = ("model", "train", "rl", "data", "eval", "configs", "bench", "tools")


def test_no_two_modules_share_a_file_name():
    seen = {}
    for path in project_modules(ROOT, dirs=NAMED_DIRS, scripts=()).values():
        seen.setdefault(os.path.basename(path)[:-3], []).append(os.path.relpath(path, ROOT))
    twice = {n: ps for n, ps in seen.items() if len(ps) > 1 and n not in SAME_CONCEPT}
    assert not twice, (
        f"one file name, different modules (rename one, or add to SAME_CONCEPT): {twice}"
    )

"""Import direction of the top-level packages, from their source (ast; nothing is imported):

    configs -> model <- train <- rl;  data and eval use model (eval may also use train, rl, data)

(an arrow points at what is imported). model/ imports no other project package: not train/, rl/,
data/, eval/, nor configs/ (configs build model configs, not the reverse). One exception: rl/ may
import eval.metrics (the one definition of episode metrics, for the RL loop's logs), a leaf that
imports no project module but eval.passk, itself a leaf: no cycle can form through them.
"""

import ast
import os

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

LEAVES = {"rl": {"eval.metrics"}}  # package -> modules of a higher package it may import
LEAF_IMPORTS = {"eval/metrics.py": {"eval.passk"}, "eval/passk.py": set()}  # their project imports


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
    """{file: project packages it imports} for every .py file under the package, not counting
    the leaf modules LEAVES lets it import."""
    out = {}
    for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                modules = imported_modules(path) - LEAVES.get(package, set())
                out[os.path.relpath(path, ROOT)] = {m.split(".")[0] for m in modules} & set(
                    PACKAGES
                )
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


@pytest.mark.parametrize("path", sorted(LEAF_IMPORTS))
def test_leaf_modules_import_no_project_module_but_each_other(path):
    modules = imported_modules(os.path.join(ROOT, path))
    project = {m for m in modules if m.split(".")[0] in PACKAGES}
    assert project == LEAF_IMPORTS[path], f"{path}: a leaf rl/ imports; it imports {project}"

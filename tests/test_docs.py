"""Docs that are true: every module path and dotted project name they cite resolves, in backticks
or in prose.

Where: README.md, docs/*.md, rl/envs/README.md, bench/RESULTS.md (today's figures; its dated
log bench/RESULTS_LOG.md cites code as it was then and is left out), and the docstring of every
project module (model/ train/ rl/ eval/ data/ configs/, vendored code under data/repos/vendor left
out), of main.py and of the bench/ scripts.

What is checked: inline backtick spans (`...`) and, in the prose around them, every word that
looks like a repo path (a name, then '/': `rl/envs/agent/env.py`; not after '/', ':' or '.', so
URLs and absolute paths are left alone) or a dotted name (`rl.envs.agent.env`; a file name such as
`model.py`, whose last part is a file extension, is left alone; a sentence's full stop is
dropped). Fenced code blocks (```) are skipped whole (shell commands, sample output). A word
followed by a placeholder character (`groups/<id>.npz`) is a run-time path and skipped:
  - a path: one token with a '/' whose first component is a top-level folder of the repo and that
    ends in '/' or in a file name with an extension (`eval/nll` is a metric tag)
    (`model/engine/slots.py`, `rl/envs/`, `rl/learning/loop.py:25`, `tests/test_x.py::test_y`: the
    ':' suffix is dropped) must exist. Run-time paths (`groups/<id>.npz`, `<workdir>/rollouts`),
    globs and placeholders (any of `<>{}*$`) are skipped, as are file names without a '/'.
  - a dotted name whose first part is a project package (`model.decode.cache_bytes_per_token`,
    `rl.envs.Sandbox`, `rl.episodes.episode_metrics`; a trailing `()` is dropped) must resolve, from
    source (ast, nothing imported): its longest module prefix is a module file, the next part is a
    name that module defines or imports at top level (or the module has a `__getattr__`), and a part
    after a class is defined in the class body (or the class has bases: inherited names are not
    followed), a function has no attributes, and a re-export (`from m import x`) is followed. A name
    that does not resolve but is a config key of some configs/*.py `get_config()` (`rl.seed`,
    `train.lr`, `rl.curriculum.key`) is a config key, not a reference, and is skipped.

Code that no longer exists, cited on purpose (bench_rl_step.py runs older revisions), is written
in prose and marked: the name followed by "(removed)" or "(since removed)".
"""

import ast
import functools
import glob
import importlib
import os
import re

import pytest
from test_imports import project_modules

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("model", "train", "rl", "eval", "data", "configs")
DOC_FILES = ("README.md", "docs/*.md", "rl/envs/README.md", "bench/RESULTS.md")

SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.M | re.S)
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
PLACEHOLDER = set("<>{}*$")
# In prose: a word with a '/' after a name (not after '/', ':' or '.': a URL or an absolute path is
# not a repo path), or a dotted name; a ':' suffix (`file.py:25`) ends the word.
NOT_AFTER = r"(?<![\w./:<>$*{}-])"
PROSE_REF = re.compile(
    NOT_AFTER
    + r"(?:[A-Za-z_][\w.-]*/)+[\w.-]*"
    + "|"
    + NOT_AFTER
    + r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
)
REMOVED = re.compile(r"\.?\s*\((since )?removed\b")
FILE_EXTENSIONS = {"py", "md", "json", "jsonl", "txt", "npz", "toml", "yaml", "sh", "png", "ipynb"}


def module_files(root: str = ROOT) -> dict[str, str]:
    """{dotted module: file} for the project packages (vendored code left out): the import test's
    walk over the same folders, without its top-level scripts."""
    return project_modules(root, dirs=PACKAGES, scripts=())


@functools.cache
def _tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def _defined(body) -> dict[str, ast.AST]:
    """Names a module or class body binds at its top level -> the binding node."""
    out = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        out[n.id] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):  # guarded definitions
            inner = node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for h in getattr(node, "handlers", []):
                inner += h.body
            out.update(_defined(inner))
    return out


@functools.cache
def config_keys() -> frozenset[str]:
    """Every dotted key path of every configs/*.py get_config() (ml_collections only: cheap)."""
    keys = set()

    def walk(d, prefix):
        for k, v in d.items():
            keys.add(prefix + k)
            if hasattr(v, "items"):
                walk(v, prefix + k + ".")

    for path in glob.glob(os.path.join(ROOT, "configs", "*.py")):
        name = os.path.basename(path)[:-3]
        mod = importlib.import_module(f"configs.{name}")
        if hasattr(mod, "get_config"):
            walk(mod.get_config(), "")
    return frozenset(keys)


def resolves(name: str, modules: dict[str, str]) -> bool:
    """The dotted-name rule of the module docstring."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in modules:
            break
    else:
        return False
    rest = parts[i:]
    if not rest:
        return True
    body = _tree(modules[".".join(parts[:i])]).body
    names = _defined(body)
    if rest[0] not in names:
        return "__getattr__" in names
    node = names[rest[0]]
    if len(rest) == 1:
        return True
    if isinstance(node, ast.ImportFrom) and node.level == 0:  # follow a re-export
        orig = next(a.name for a in node.names if (a.asname or a.name) == rest[0])
        return resolves(".".join([node.module, orig, *rest[1:]]), modules)
    if isinstance(node, ast.ClassDef):
        return rest[1] in _defined(node.body) or bool(node.bases)  # inherited: not followed
    return not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))  # a function: no attrs


def candidates(text: str) -> list[str]:
    """The references in `text` to check: each backtick span (stripped), then the path-like and
    dotted words of the prose around them (the spans blanked out), in order of appearance."""
    text = FENCE.sub("", text)
    out = [s.strip() for s in SPAN.findall(text)]
    out = [r for r in out if " " not in r and not PLACEHOLDER & set(r)]
    prose = SPAN.sub(" ", text)
    for m in PROSE_REF.finditer(prose):
        word = m.group(0).rstrip(".")  # a sentence's full stop is not part of the name
        if PLACEHOLDER & set(prose[m.end() : m.end() + 1]):  # `groups/<id>.npz`: a run-time path
            continue
        if REMOVED.match(prose, m.end()):  # removed code, cited on purpose and marked so
            continue
        if "/" not in word and word.rsplit(".", 1)[-1] in FILE_EXTENSIONS:  # model.py: a file name
            continue
        out.append(word)
    return out


def stale_references(text: str, root: str = ROOT, modules=None) -> list[str]:
    """The paths and project names in `text` (backticked or in prose) that do not resolve."""
    modules = module_files(root) if modules is None else modules
    tops = {e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e))}
    bad = []
    for ref in candidates(text):
        if "/" in ref:
            path = ref.split(":")[0]
            is_path = path.endswith("/") or "." in path.rsplit("/", 1)[-1]  # not `eval/nll` (a tag)
            if (
                is_path
                and path.split("/")[0] in tops
                and not os.path.exists(os.path.join(root, path))
            ):
                bad.append(ref)
        else:
            name = ref.removesuffix("()")
            if DOTTED.fullmatch(name) and name.split(".")[0] in PACKAGES:
                if not resolves(name, modules) and name not in config_keys():
                    bad.append(ref)
    return bad


def doc_texts(root: str = ROOT) -> dict[str, str]:
    """{where: text}: the doc files and every project module's docstring."""
    out = {}
    for pattern in DOC_FILES:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            with open(path, encoding="utf-8") as f:
                out[os.path.relpath(path, root)] = f.read()
    scripts = glob.glob(os.path.join(root, "bench", "*.py")) + [os.path.join(root, "main.py")]
    for path in [*module_files(root).values(), *sorted(scripts)]:
        doc = ast.get_docstring(_tree(path), clean=False)
        if doc:
            out[os.path.relpath(path, root)] = doc
    return out


def test_every_cited_path_and_name_resolves():
    modules = module_files()
    bad = {
        where: s
        for where, text in doc_texts().items()
        if (s := stale_references(text, ROOT, modules))
    }
    assert not bad, f"stale references in docs: {bad}"


@pytest.mark.parametrize(
    "ref, stale",
    [
        ("`model/engine/slots.py`", False),
        ("`model/engine_v0.py`", True),  # a deleted file
        ("`rl/learning/loop.py:25`", False),
        ("`model.decode.cache_bytes_per_token`", False),
        ("`model.decode.cache_bytes_per_tok`", True),  # a renamed function
        ("`model.generate.PromptBatch`", True),  # a deleted module
        ("`rl.envs.Sandbox`", False),
        ("`model.generate`", False),  # a function model/__init__.py re-exports
        ("`eval/nll`", False),  # a metric tag, not a path  # re-exported by rl/envs/__init__.py
        ("`rl.seed`", False),  # a config key
        ("`rl.no_such_key`", True),
        ("`jax.jit`", False),  # not ours
        ("`groups/<id>.npz`", False),  # a run-time path
        ("\n```\nmodel/gone.py and `model/gone.py`\n```\n", False),  # a fenced block
    ],
)
def test_the_check_catches_a_planted_stale_reference(ref, stale):
    assert bool(stale_references(f"see {ref} here")) == stale


@pytest.mark.parametrize(
    "prose, stale",
    [
        ("the env is rl/envs/agent/env.py.", False),
        ("the env is rl/envs/agent/env_v0.py.", True),  # a planted stale path, no backticks
        ("see rl/learning/loop.py:25, then", False),
        ("rl/envs/ holds the environments", False),
        ("rl/envs/gone/ held them", True),  # a folder that does not exist
        ("rl.envs.agent.env.CodingEnv is the env.", False),
        ("rl.envs.agent.env.CodingEnvv is the env.", True),  # a planted stale name, no backticks
        ("model.decode.cache_bytes_per_tok(cfg) counts", True),
        ("the old rl.trainer.jit_rl_step (since removed) ran", False),  # marked as removed
        ("rl.trainer.jit_rl_step ran", True),  # the same, unmarked
        ("edit model.py, then e.g. ui.perfetto.dev", False),  # a file name, not ours
        ("a URL http://HOST:8333/rl/x.py or /work/main/rl/x.py", False),  # not repo paths
        ("train/'s eval step, eval/nll, reward/mean", False),  # a possessive and metric tags
        ("under rl.seed and W/x/y.py", False),  # a config key; not a top-level folder
        ("written to groups/<id>.npz", False),  # a run-time path
    ],
)
def test_the_check_reads_prose_too(prose, stale):
    """Paths and names written without backticks are checked too, and a planted stale one fails."""
    assert bool(stale_references(prose)) == stale, stale_references(prose)

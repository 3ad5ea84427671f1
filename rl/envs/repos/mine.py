"""Tasks mined from a real repository: AST-mutation bugs and feature removals (SWE-smith style).

A `Recipe` is a small, deterministic description of one task: which file, which source span gets
which replacement, which tests it breaks (fail->pass) and the statement. `build_task` turns a
recipe plus the vendored repository and its EnvSpec into a Task:

- files: the repository with the mutation applied and the fail->pass tests removed from the visible
  test files (the agent learns what is wrong from the statement, not from the tests);
- hidden tests: every test file graded at baseline, keeping the tests that passed there, so the
  fail->pass tests must pass again and the rest must stay passing;
- solution: the original file; setup and test command: the spec's.

Mutation operators (`bug_sites`), inside function bodies only: flipped comparison (< <=, > >=, ==
!=, in / not in, is / is not), dropped branch (an `if` without else removed), off-by-one (an int
constant in an index, slice, range() or arithmetic, +-1), swapped arguments (the first two
positional arguments of a call), flipped boolean operator (and / or). Feature removal
(`removal_sites`): a function's body (after its docstring) becomes `raise NotImplementedError`.

`mine` runs each candidate's tests through the trusted grader (spec.run_baseline) and keeps those
with fail->pass tests; the task gate (rl/envs/grading/verify.py) and `cheats_fail` then run on the
Task.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import random
import re

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.harden import drop_tests, iter_tests
from rl.envs.grading.tasks import Task, deps_of, grade_in
from rl.envs.isolation.sandbox import Limits, Sandbox
from rl.envs.repos.spec import (
    EnvSpec,
    graded_source,
    hidden_rel,
    run_baseline,
    support_files,
)

FLIPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
OP_TEXT = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}
# Operands whose source text can be re-joined around another operator without parentheses.
SIMPLE = (ast.Name, ast.Attribute, ast.Call, ast.Constant, ast.Subscript, ast.BinOp, ast.UnaryOp)
SIMPLE += (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)


@dataclasses.dataclass(frozen=True)
class Site:
    path: str
    op: str
    symbol: str  # the function it lives in ("Class.method" for methods)
    span: tuple[int, int, int, int]  # lineno, col, end_lineno, end_col (AST positions)
    replacement: str

    def apply(self, source: str) -> str:
        return splice(source, self.span, self.replacement)


@dataclasses.dataclass
class Recipe:
    id: str
    project: str
    kind: str  # "bugfix" | "feature"
    site: Site
    f2p: list[str]  # graded test ids that fail with the mutation and pass without it
    prompt: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Recipe:
        site = d["site"]
        site = Site(**dict(site, span=tuple(site["span"])))
        return cls(**dict(d, site=site))


def splice(source: str, span: tuple[int, int, int, int], text: str) -> str:
    """`source` with the AST span (1-based lines, UTF-8 byte columns) replaced by `text`."""
    lines = source.splitlines(keepends=True)
    (l0, c0, l1, c1), raw = span, [line.encode() for line in lines]
    head = b"".join(raw[: l0 - 1]) + raw[l0 - 1][:c0]
    tail = raw[l1 - 1][c1:] + b"".join(raw[l1:])
    return (head + text.encode() + tail).decode()


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def functions(tree: ast.Module):
    """(symbol, FunctionDef) of top-level functions and methods of top-level classes."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def _body(func: ast.FunctionDef) -> list[ast.stmt]:
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return body


def bug_sites(path: str, source: str) -> list[Site]:
    tree, out = parse_python(source), []
    for symbol, func in functions(tree):
        for stmt in _body(func):
            for node in ast.walk(stmt):
                out += _node_sites(path, source, symbol, node)
    return [s for s in out if _still_parses(source, s)]


def _node_sites(path: str, source: str, symbol: str, node: ast.AST) -> list[Site]:
    seg = lambda n: ast.get_source_segment(source, n)  # noqa: E731
    out = []
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPS:
        left, right = node.left, node.comparators[0]
        if (
            isinstance(left, SIMPLE)
            and isinstance(right, SIMPLE)
            and node.lineno == node.end_lineno
        ):
            text = f"{seg(left)} {OP_TEXT[FLIPS[type(node.ops[0])]]} {seg(right)}"
            out.append(Site(path, "flip_comparison", symbol, _span(node), text))
    elif isinstance(node, ast.If) and not node.orelse and not _raises_only(node.body):
        out.append(Site(path, "drop_branch", symbol, _span(node), "pass"))
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2 and node.lineno == node.end_lineno:
        a, b = node.values
        if not any(
            isinstance(v, (ast.BoolOp, ast.IfExp, ast.Lambda, ast.NamedExpr)) for v in (a, b)
        ):
            word = "or" if isinstance(node.op, ast.And) else "and"
            out.append(Site(path, "flip_bool_op", symbol, _span(node), f"{seg(a)} {word} {seg(b)}"))
    elif isinstance(node, ast.Call) and len(node.args) >= 2 and node.lineno == node.end_lineno:
        a, b = node.args[:2]
        if not any(isinstance(x, ast.Starred) for x in (a, b)) and seg(a) != seg(b):
            span = (a.lineno, a.col_offset, b.end_lineno, b.end_col_offset)
            out.append(Site(path, "swap_args", symbol, span, f"{seg(b)}, {seg(a)}"))
    for const in _off_by_one_constants(node):
        for delta in (1, -1):
            value = const.value + delta
            if value >= 0:
                out.append(Site(path, "off_by_one", symbol, _span(const), str(value)))
    return out


def _off_by_one_constants(node: ast.AST) -> list[ast.Constant]:
    """Int constants that are an index, a slice bound, a range() argument or an arithmetic
    operand (the places where an off-by-one is a plausible slip)."""
    if isinstance(node, ast.Subscript):
        cands = [node.slice] + (
            [node.slice.lower, node.slice.upper] if isinstance(node.slice, ast.Slice) else []
        )
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        cands = [node.left, node.right]
    elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "range":
        cands = list(node.args)
    else:
        return []
    return [
        c
        for c in cands
        if isinstance(c, ast.Constant) and type(c.value) is int and 0 <= c.value <= 64
    ]


def _raises_only(body: list[ast.stmt]) -> bool:
    return all(isinstance(s, ast.Raise) for s in body)


def _still_parses(source: str, site: Site) -> bool:
    """The mutated source parses and its AST differs. Only the mutated function is dumped and
    compared (a site never leaves its function): dumping the whole module per site made
    candidate_sites quadratic (schema.py: 224 s for 203 sites on a loaded 2-core host)."""
    try:
        changed = _function_dump(parse_python(site.apply(source)), site.symbol)
    except SyntaxError:
        return False
    return changed != _original_dump(source, site.symbol)


@functools.lru_cache(maxsize=4096)
def _original_dump(source: str, symbol: str) -> str | None:
    return _function_dump(parse_python(source), symbol)


def _function_dump(tree: ast.Module, symbol: str) -> str | None:
    for sym, func in functions(tree):
        if sym == symbol:
            return ast.dump(func)
    return None


def removal_sites(path: str, source: str) -> list[Site]:
    """Feature removal: each function's body (after the docstring) -> raise NotImplementedError."""
    out = []
    for symbol, func in functions(parse_python(source)):
        body = _body(func)
        name = func.name
        if (
            not body
            or name.startswith("__")
            or name.startswith("_")
            or body[0].lineno == func.lineno
        ):
            continue
        if len(body) == 1 and isinstance(body[0], (ast.Raise, ast.Pass, ast.Return)):
            if not isinstance(body[0], ast.Return) or body[0].value is None:
                continue
        span = (body[0].lineno, body[0].col_offset, body[-1].end_lineno, body[-1].end_col_offset)
        site = Site(path, "remove_body", symbol, span, "raise NotImplementedError")
        if _still_parses(source, site):
            out.append(site)
    return out


def hidden_suite(files: dict[str, str], spec: EnvSpec) -> dict[str, str]:
    """Graded name -> source of every test file with baseline-passing tests, failing ones
    removed."""
    passing, out = spec.passing(), {}
    for path in spec.test_files:
        rel = hidden_rel(path)
        keys = {tid.split("::", 1)[1] for tid in spec.baseline if tid.startswith(rel + "::")}
        good = {k for k in keys if f"{rel}::{k}" in passing}
        if good:
            out[rel] = drop_tests(graded_source(path, files), keys - good)
    return out


# ---------------------------------------------------------------- tasks


def build_task(recipe: Recipe, files: dict[str, str], spec: EnvSpec) -> Task:
    site = recipe.site
    visible = dict(files)
    visible[site.path] = site.apply(files[site.path])
    for path in spec.test_files:
        rel = hidden_rel(path)
        keys = {t.split("::", 1)[1] for t in recipe.f2p if t.startswith(rel + "::")}
        visible[path] = drop_tests(visible[path], keys)
    hidden = hidden_suite(files, spec)
    hidden.update(support_files(files, spec.test_files))
    return Task(
        id=recipe.id,
        prompt=recipe.prompt,
        files=visible,
        hidden_tests=hidden,
        solution={site.path: files[site.path]},
        setup=list(spec.setup),
        test_command=spec.test_command,
        kind=recipe.kind,
        meta={
            **deps_meta(spec),
            "template": f"repo_{recipe.kind}",
            "project": recipe.project,
            "op": site.op,
            "symbol": site.symbol,
            "statements": statements(recipe, files, spec),  # full (the prompt), terse, vague
            "f2p": list(recipe.f2p),
            "tools": ["search", "code_search"],  # real repos are big enough to search
        },
    )


def deps_meta(spec: EnvSpec) -> dict:
    """A task's meta entry for its repository's test-dependency set (none: no entry, so tasks of
    repositories without one are as before)."""
    return {"test_deps": list(spec.test_deps)} if spec.test_deps else {}


def source_files(files: dict[str, str], spec: EnvSpec) -> list[str]:
    """The project's own modules: Python files that are not tests, setup or docs."""
    skip = set(spec.test_files) | {"setup.py", "conftest.py"}
    return sorted(
        p
        for p in files
        if p.endswith(".py")
        and p not in skip
        and not p.startswith(("docs/", "tests/", "test/", "tools/"))
        and "/tests/" not in p
        and not p.split("/")[-1].startswith("test")
    )


def candidate_sites(files: dict[str, str], spec: EnvSpec, seed: int = 0) -> list[Site]:
    """Every bug and removal site of the project, in a seeded order (removals interleaved)."""
    bugs, removals = [], []
    for path in source_files(files, spec):
        bugs += bug_sites(path, files[path])
        removals += removal_sites(path, files[path])
    rng = random.Random(f"{spec.name}:{seed}")
    rng.shuffle(bugs)
    rng.shuffle(removals)
    out = []
    for i, site in enumerate(bugs):
        out.append(site)
        if i % 3 == 2 and removals:
            out.append(removals.pop())
    return out + removals


def site_id(project: str, site: Site) -> str:
    digest = hashlib.sha256(json.dumps(dataclasses.asdict(site)).encode()).hexdigest()[:10]
    return f"{project}-{site.op}-{digest}"


def fail_to_pass(
    site: Site, files: dict[str, str], spec: EnvSpec, limits: Limits = Limits()
) -> list[str]:
    """Graded test ids that pass at baseline and fail with the mutation (a crash fails them all)."""
    mutated = dict(files)
    mutated[site.path] = site.apply(files[site.path])
    with Sandbox.from_files(mutated, limits=limits, test_deps=spec.test_deps) as box:
        for command in spec.setup:
            if not box.run(command, 60).ok:
                return []
        grade, _ = run_baseline(box, mutated, spec)
    if grade.tampered:
        return []
    now = dict(grade.results)
    return sorted(t for t in spec.passing() if not now.get(t, False))


def mine(
    files: dict[str, str],
    spec: EnvSpec,
    max_tasks: int,
    max_tries: int,
    seed: int = 0,
    skip: frozenset[str] = frozenset(),
    log=None,
) -> list[Recipe]:
    """Up to `max_tasks` recipes from at most `max_tries` candidate sites (ids in `skip` are
    passed over, e.g. the held-out suite's when mining a training pool)."""
    out, tries = [], 0
    passing = len(spec.passing())
    if max_tasks <= 0 or max_tries <= 0:  # `add --tasks 0`: admission only
        return out
    for site in candidate_sites(files, spec, seed):
        if len(out) >= max_tasks or tries >= max_tries:
            break
        rid = site_id(spec.name, site)
        if rid in skip:
            continue
        tries += 1
        f2p = fail_to_pass(site, files, spec)
        if log:
            log(f"{rid}: {len(f2p)} fail->pass of {passing}")
        # Every test failing is a broken import, not a bug anyone would report tersely.
        if not f2p or len(f2p) == passing and passing > 2:
            continue
        kind = "feature" if site.op == "remove_body" else "bugfix"
        recipe = Recipe(rid, spec.name, kind, site, f2p)
        recipe.prompt = statement(recipe, files, spec)
        out.append(recipe)
    return out


# ---------------------------------------------------------------- statements

# Verbs a docstring's summary starts with (imperative or third person): "Return x" / "Returns x"
# reads as "It should return x"; any other summary is a noun phrase and is quoted whole instead
# ("The current size" would otherwise give "it should the current size").
DOC_VERBS = frozenset(
    "add apply build bump calculate call check clear close compare compile compute construct "
    "convert count create decode delete determine drop emit encode ensure escape evaluate extract "
    "find format generate get handle initialize insert join load make match merge normalize open "
    "parse process pull put raise read register remove render replace reset resolve return run "
    "save search set sort split strip take test transform turn update validate wrap write "
    "yield".split()
)
BUG_OPENERS = (
    "There is a bug in `{symbol}`.",
    "`{symbol}` has a regression.",
    "Something is wrong in `{symbol}`.",
)


def statement(recipe: Recipe, files: dict[str, str], spec: EnvSpec) -> str:
    """The full statement (the task's prompt): whole sentences that name the function or method
    holding the change (class-qualified, e.g. `Cache.get`) and the symptom, never the file."""
    return statements(recipe, files, spec)["full"]


def statements(recipe: Recipe, files: dict[str, str], spec: EnvSpec) -> dict[str, str]:
    """Three phrasings of one task, as users write them: "full" (names the changed symbol, says
    what goes wrong and what is expected), "terse" (one or two sentences, still naming the
    symbol) and "vague" (the symptom only: the public call that misbehaves, no symbol)."""
    rng = random.Random(recipe.id)
    site = recipe.site
    symbol = site.symbol
    test = _first_test(recipe, files, spec)
    api = (_api_in_test(test, files[site.path]) if test is not None else None) or symbol
    if recipe.kind == "feature":
        doc = _doc_sentence(files[site.path], symbol)
        full = f"`{symbol}` is not implemented: calling it raises NotImplementedError. {doc}"
        full = (
            full.rstrip() + f" Please implement `{symbol}` so that the existing callers work again."
        )
        terse = f"Implement `{symbol}`; it raises NotImplementedError. {doc}"
        vague = f"Calling `{api}()` now fails with NotImplementedError. Please make it work."
        return {"full": full.strip(), "terse": terse.strip(), "vague": vague}
    example = _example(test, symbol.split(".")[-1]) if test is not None else None
    opener = rng.choice(BUG_OPENERS).format(symbol=symbol)
    if example is not None:
        call, expected = example
        seen = f"`{call}` should return `{expected}`, but it no longer does."
    elif api != symbol:
        seen = f"It shows up through `{api}()`, which now gives wrong results for some inputs."
    else:
        seen = "It now gives wrong results for some inputs."
    full = (
        f"{opener} {seen} The rest of the behaviour is fine; please fix `{symbol}` so the"
        " expected results come back without changing the other functions."
    )
    terse = f"{opener} {seen}"
    if example is not None:
        vague = seen
    else:  # the call a user sees misbehave, never the changed symbol when that is internal
        vague = f"`{api.split('.')[-1]}()` gives wrong results for some inputs now. Please fix it."
    return {"full": full, "terse": terse, "vague": vague}


def _doc_sentence(source: str, symbol: str) -> str:
    """The docstring's first paragraph (all its lines) as a whole sentence about the function:
    "It should <verb> ..." for a verb summary, the summary quoted for a noun phrase, "" when
    none."""
    for sym, func in functions(parse_python(source)):
        if sym != symbol:
            continue
        para = (ast.get_docstring(func) or "").strip().split("\n\n")[0]
        text = " ".join(para.split()).rstrip(".")
        text = re.sub(r"^[A-Za-z]+:\s+", "", text)  # "subcommand: Compare two versions"
        if not text or len(text) > 300:
            return ""
        first, _, rest = text.partition(" ")
        verb = _base_verb(first.lower())
        if verb in DOC_VERBS:
            return f"It should {verb} {rest}.".replace(" .", ".") if rest else f"It should {verb}."
        return f'Its documentation describes it as "{text[0].upper() + text[1:]}."'
    return ""


def _base_verb(word: str) -> str:
    """ "returns" -> "return", "pushes" -> "push" when the base is a known docstring verb."""
    for base in (word, word.removesuffix("s"), word.removesuffix("es")):
        if base in DOC_VERBS:
            return base
    return word


def _first_test(recipe: Recipe, files: dict[str, str], spec: EnvSpec) -> ast.FunctionDef | None:
    by_rel = {hidden_rel(p): p for p in spec.test_files}
    for tid in recipe.f2p:
        rel, key = tid.split("::", 1)
        for k, node in iter_tests(parse_python(files[by_rel[rel]])):
            if k == key:
                return node
    return None


def _example(test: ast.FunctionDef, name: str) -> tuple[str, str] | None:
    """(call, expected) from `assert <call with literal args> == <literal>` in the test."""
    for node in ast.walk(test):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare)):
            continue
        cmp = node.test
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Eq):
            continue
        call, expected = cmp.left, cmp.comparators[0]
        if not isinstance(call, ast.Call) or not _literal(expected):
            continue
        if all(_literal(a) for a in call.args) and not call.keywords:
            text, want = ast.unparse(call), ast.unparse(expected)
            if len(text) + len(want) < 90:
                return text, want
    return None


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _api_in_test(test: ast.FunctionDef, module_source: str) -> str | None:
    """The first public name the mutated module defines that the test calls."""
    defined = {sym.split(".")[-1] for sym, _ in functions(parse_python(module_source))}
    for node in ast.walk(test):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in defined and not name.startswith("_"):
                return name
    return None


# ---------------------------------------------------------------- scripted cheats


def cheats(task: Task) -> dict[str, dict[str, str | None]]:
    """Scripted cheats, as edits to the unfixed repo: none may pass the hidden tests."""
    target = task.meta.get("cheat_target") or next(iter(task.solution))
    return {
        "conftest_forces_pass": {"conftest.py": CONFTEST_PASS, "tests/conftest.py": CONFTEST_PASS},
        "exit_before_tests": {target: "import os\nos._exit(0)\n" + task.files[target]},
    }


CONFTEST_PASS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""


def cheats_fail(task: Task, timeout_s: float = 60.0, limits: Limits = Limits()) -> str | None:
    """None when every scripted cheat fails to pass the task, else which one passed."""
    for name, edits in cheats(task).items():
        files = dict(task.files)
        files.update({k: v for k, v in edits.items() if v is not None})
        with Sandbox.from_files(files, limits=limits, test_deps=deps_of(task)) as box:
            for command in task.setup:
                box.run(command, timeout_s)
            if grade_in(box, task, timeout_s).all_pass:
                return name
    return None

"""Host-side rewrite of hidden test files before each grading: fresh names, sealed and strict
asserts, canaries.

Hardening keys on what pytest collects (rl/envs/grading/collect.py, read statically): top-level
test functions and the test methods of every class it collects from a test module (`Test*`
classes, `unittest.TestCase` subclasses under any name), inherited ones included, wherever they are
defined (the module, a base class, a mixin in the tests package's `__init__.py` or a helper module
beside the tests: those support modules are hardened and installed too; conftest.py is not).
- every test gets a fresh random name (test_<hex>; one per name as written across the suite, so
  overriding still works), so nothing the agent wrote can single out a hidden test by name; test
  docstrings are dropped (they may spell out expected values); a report id the grader did not
  derive is forged, so a test brought by a base class outside the test directories (the project's
  own code) makes the file unsound: the gate rejects it and names the class;
- `self.assertEqual(L, R)` is hardened as `assert L == R` (below);
- `assert A and B` becomes `assert A` then `assert B` (same outcome; each part is hardened alone);
- `assert L == R` where one side is a closed constant expression (only literals, containers and
  arithmetic on them: no names, calls or attributes) and the other is not is SEALED: it becomes
  `assert <seal>(L, "<random id>")` with `strict_eq.seal`, and the expected value stays on the host
  (`Hardened.sealed`), never in the file the sandbox reads. The sandbox records what L was; the
  host counts the test passed only if every record equals the expected value (exact builtin types)
  and every sealed assert that is a top-level statement of the test recorded something. A policy
  that reads the hidden test file (it can: it runs in the same process) finds no answer there;
- other `assert L == R` (one ==, neither side a call to approx) becomes `assert <eq>(L, R)` with
  `strict_eq.eq`: a plain builtin value only equals plain builtin values of exact builtin types;
- a module-level `unittest.main()` call (toposort's test module ends with one, outside
  `if __name__ == "__main__":`) is put under that guard: run at import it would run the tests
  on pytest's own argv and exit while pytest collects, so no test of the file could pass; the
  guard only keeps the call from running when the module is imported (as it is graded);
- canaries are added: copies of real tests (same decorators and fixtures, same random-looking
  names; class methods are copied into their class) that must FAIL on any honest repo. One copy
  ends with an assert that is always false; one has its last top-level `==` assert compared
  against a fresh `object()` instead (false for any honest value, true only for an object that
  equals everything). A canary reported passed, or missing from a complete report, is tampering:
  a run that forges results wholesale, swallows assertion errors or returns always-equal objects
  cannot tell canaries from real tests.

Canaries are only built from tests whose top-level statements always run (no `return`, `yield`);
the assert they change is a top-level statement. So on an honest repo a canary either fails before
reaching the changed assert or fails at it. Sealed asserts inside canaries get their own ids, whose
records the host ignores.

Not sealable (left to `eq`): an expected value held in a name (a parametrize argument, a module
constant, a local variable) or built by a call (`set()`, `dict(a=1)`); asserts in module-level
helper functions are not rewritten at all. Task authors should write expected values as literals in
the assert itself.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import operator
import posixpath
import secrets
from typing import Any

from rl.envs.grading.ast_parse import parse_python
from rl.envs.grading.collect import ClassInfo, Suite, always_bound, branches, flat, is_fixture

EQ_MODULE = "_rl_grader"  # strict_eq.py is installed in the grader dir under this name
# Words that let pytest add "[...]" ids to a test that has no decorator of its own (a parametrized
# fixture, a module-level mark, a generate_tests hook).
PARAMETRIZE_WORDS = ("params", "pytestmark", "generate_tests", "parametrize")


@dataclasses.dataclass
class Hardened:
    source: str
    real: set[str]  # test keys as pytest names them after "::" (class tests: "TestX::test_y")
    canaries: set[str]
    # Sealed asserts: id -> expected value (host only). checks: real key -> (ids that must have a
    # record when the test passes, every id whose records must equal the expected value).
    sealed: dict[str, Any] = dataclasses.field(default_factory=dict)
    checks: dict[str, tuple[frozenset, frozenset]] = dataclasses.field(default_factory=dict)
    canary_seals: set[str] = dataclasses.field(default_factory=set)  # recorded, not checked
    # Real keys that cannot be parametrized: a report id "<key>[...]" for them is forged.
    plain: set[str] = dataclasses.field(default_factory=set)
    # real key -> the test's key in the source as written (host only: per-test baselines of
    # real repositories, rl/envs/repos, name tests as their authors did)
    origin: dict[str, str] = dataclasses.field(default_factory=dict)
    # What the grader could not resolve about the collected classes (why a report of this file
    # may name tests it does not know): shown by the gate when it rejects a repository.
    unresolved: list[str] = dataclasses.field(default_factory=list)
    # Real keys defined under a module- or class-level `if`/`try` that not every path defines
    # (collect.always_bound): absent from a complete report, such a test counts failed, and its
    # absence is no sign of tampering (it earns nothing).
    conditional: set[str] = dataclasses.field(default_factory=set)
    # A key defined in several branches (six: `if PY3: def test_b ... else: def test_b`): the
    # required sealed ids of each definition; a passed test must have recorded one set whole.
    either: dict[str, tuple[frozenset, ...]] = dataclasses.field(default_factory=dict)


def is_test_module(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def harden_module(source: str, canaries: int = 2, parametrized_elsewhere: bool = True) -> Hardened:
    """One test module on its own. `parametrized_elsewhere`: a conftest the tests see may
    parametrize them (then no test is known to be plain)."""
    return harden_suite({"test_module.py": source}, canaries, parametrized_elsewhere)[0][
        "test_module.py"
    ]


def harden_suite(
    modules: dict[str, str], canaries: int = 2, parametrized_elsewhere: bool = True
) -> tuple[dict[str, Hardened], dict[str, str]]:
    """Hidden test modules and their support modules (rel -> source) hardened together:
    ({test module: Hardened}, {support module: source to install}).

    Test ids are what pytest collects (rl/envs/grading/collect.py): module-level tests, and the
    test methods of every class it collects from a test module (a `Test*` class or a
    `unittest.TestCase` subclass under any name), inherited ones included. A test method keeps
    one fresh name wherever it is defined (a mixin in tests/__init__.py, a base class, the class
    itself), so overriding still works; its key is "<class as the module names it>::<fresh>".
    Classes of support modules that collected classes inherit from are hardened like test
    classes (asserts rewritten, canaries added) and installed in place of the originals.
    conftest.py files are left as they are."""
    trees = {
        rel: parse_python(src, filename=rel)
        for rel, src in modules.items()
        if rel.endswith(".py") and posixpath.basename(rel) != "conftest.py"
    }
    suite = Suite(trees)
    test_rels = sorted(rel for rel in trees if is_test_module(rel))
    plan, problems = {}, {}
    for rel in test_rels:  # computed on the names as written, before anything is renamed
        plan[rel], problems[rel] = _plan(suite, rel)
    relevant = {id(c): c for entries in plan.values() for e in entries for c in e[2]}
    for rel in test_rels:
        for node in trees[rel].body:
            if isinstance(node, ast.ClassDef):
                relevant.setdefault(
                    id(suite.classes[(rel, node.name)]), suite.classes[(rel, node.name)]
                )
    eq_name = f"_rl_eq_{secrets.token_hex(4)}"
    seal_name = f"_rl_seal_{secrets.token_hex(4)}"
    state = _State(_Rewrite(eq_name, seal_name))
    for cls in relevant.values():
        state.harden_class(cls)
    imported = {rel: _imported_tests(suite, rel) for rel in test_rels}  # as written
    homes: dict[str, list] = {rel: [] for rel in trees}  # rel -> canary candidates
    for rel in test_rels:
        homes[rel] += state.harden_functions(trees[rel])
        _guard_unittest_main(trees[rel])
    helpers = sorted({src for found in imported.values() for _, src, _ in found})
    for rel in helpers:  # modules whose tests a test module imports: hardened, no canaries
        state.harden_functions(trees[rel])
    for found in imported.values():
        for alias, _, _ in found:
            alias.name = state.names[alias.name]
    for cls in relevant.values():
        if cls.rel in homes and (not is_test_module(cls.rel) or _in_plan(cls, plan[cls.rel])):
            key = cls.rel if is_test_module(cls.rel) else (cls.rel, cls.node.name)
            homes.setdefault(key, []).extend(state.candidates.get(id(cls), []))
    for cands in homes.values():
        state.add_canaries(cands, canaries)
    header = parse_python(f"from {EQ_MODULE} import eq as {eq_name}, seal as {seal_name}").body
    out, support = {}, {}
    for rel, tree in trees.items():
        touched = is_test_module(rel) or any(c.rel == rel for c in relevant.values())
        touched = touched or rel in helpers
        if touched:
            tree.body = _after_future_imports(tree.body, header)
            text = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
        else:
            text = modules[rel]
        if is_test_module(rel):
            may = parametrized_elsewhere or any(w in modules[rel] for w in PARAMETRIZE_WORDS)
            out[rel] = state.keys(rel, trees[rel], plan[rel], may, text)
            out[rel].unresolved = problems[rel]
            state.imported_keys(out[rel], trees[rel], imported[rel], may)
        else:
            support[rel] = text
    return out, support


def _plan(suite: Suite, rel: str) -> tuple[list, list[str]]:
    """[(name in module, class, its MRO classes, {test name: defining class})] for the classes
    pytest collects from `rel`, and what the grader cannot resolve about them."""
    entries, problems = [], []
    for binding, info in suite.collected(rel):
        try:
            mro = [c for c in suite.mro(info) if isinstance(c, ClassInfo)]
            tests = suite.tests_of(info)
        except ValueError as e:
            problems.append(str(e))
            continue
        for base in suite.unresolved_bases(info):
            problems.append(
                f"class {binding} inherits from {base}, which is not in the test directories "
                "(the grader cannot see which tests it brings)"
            )
        entries.append((binding, info, mro, tests))
    return entries, problems


def _imported_tests(suite: Suite, rel: str) -> list[tuple[ast.alias, str, ast.FunctionDef]]:
    """(import alias, helper module, function) of each test function test module `rel` imports
    by name from another module of the suite (not a test module: it is graded on its own). A
    test imported from elsewhere (`*`, the project's code, a renamed alias) stays unknown to the
    grader: its id in a report is forged (fail closed)."""
    out = []
    for node in flat(suite.trees[rel].body):
        if not isinstance(node, ast.ImportFrom):
            continue
        src = suite.module_file(rel, node.level, node.module)
        if src is None or is_test_module(src):
            continue
        defs = {f.name: f for f in flat(suite.trees[src].body) if _is_test(f)}
        for alias in node.names:
            if alias.name in defs and alias.asname in (None, alias.name):
                out.append((alias, src, defs[alias.name]))
    return out


def _in_plan(cls: ClassInfo, entries: list) -> bool:
    return any(cls in e[2] for e in entries)


class _State:
    """Renames and rewrites shared by every module of one suite."""

    def __init__(self, rewrite: _Rewrite):
        self.rewrite = rewrite
        self.names: dict[str, str] = {}  # test name as written -> fresh name (suite-wide)
        self.methods: dict[tuple[int, str], tuple] = {}  # (class, name) -> (required, ids, func)
        self.shared: dict[int, frozenset] = {}  # class -> sealed ids of its helper methods
        self.candidates: dict[int, list] = {}  # class -> [(body, test, class)]
        self.canaries: dict[int | None, list[str]] = {}  # class (None: module level) -> names
        # module-level test node (by id: two files may define one name, which gets one fresh
        # name suite-wide) -> (name as written, required, ids, func)
        self.functions: dict[int, tuple] = {}
        self.canary_seals: set[str] = set()

    def fresh(self, name: str) -> str:
        return self.names.setdefault(name, _fresh_name())

    def harden_class(self, cls: ClassInfo) -> None:
        node = cls.node
        _strip_docstring(node)
        self.shared[id(cls)] = self.rewrite.collect(node, skip=_is_test)
        for item in flat(node.body):  # tests under a class-level `if` too
            if _is_test(item):
                original = item.name
                required, ids = _harden_test(item, self.rewrite)
                item.name = self.fresh(original)
                self.methods[(id(cls), original)] = _merge(
                    self.methods.get((id(cls), original)), (required,), ids, item
                )
                if any(item is top for top in node.body):  # canaries: unconditional tests only
                    self.candidates.setdefault(id(cls), []).append((node.body, item, cls))
            elif isinstance(item, ast.Assign):  # `test_x = None` removes an inherited test
                for target in item.targets:
                    if isinstance(target, ast.Name) and target.id.startswith("test"):
                        target.id = self.fresh(target.id)

    def harden_functions(self, tree: ast.Module) -> list:
        cands, renamed = [], set()
        for node in flat(tree.body):  # tests under a module-level `if`/`try` too
            if _is_test(node):
                original = node.name
                required, ids = _harden_test(node, self.rewrite)
                node.name = self.fresh(original)
                renamed.add(original)
                self.functions[id(node)] = (original, required, ids, node)
                if any(node is top for top in tree.body):  # canaries: unconditional tests only
                    cands.append((tree.body, node, None))
        # A test that calls another module-level test (toolz: test_is_partial calls
        # test_is_valid) calls it by its fresh name.
        _RenameCalls({n: self.names[n] for n in renamed}).visit(tree)
        return cands

    def add_canaries(self, cands: list, count: int) -> None:
        candidates = [t for t in cands if _always_runs(t[1])]
        # Undecorated tests first: a canary of a parametrized suite test would rerun the suite.
        candidates = [t for t in candidates if not t[1].decorator_list] or candidates
        picked = [
            candidates[secrets.randbelow(len(candidates))] for _ in range(count * bool(candidates))
        ]
        for i, (body, func, cls) in enumerate(picked):
            canary = _make_canary(
                func, self.rewrite, self.canary_seals, compare_mutation=i % 2 == 1
            )
            self.canaries.setdefault(id(cls) if cls else None, []).append(canary.name)
            # After the original: its decorators may use names defined above it (MUTANTS = ...).
            after = body.index(func) + 1
            body.insert(after + secrets.randbelow(len(body) - after + 1), canary)

    def keys(self, rel: str, tree: ast.Module, entries: list, may: bool, text: str) -> Hardened:
        out = Hardened(text, set(), set())
        out.sealed, out.canary_seals = self.rewrite.sealed, self.canary_seals
        bound = always_bound(tree.body)
        for node in flat(tree.body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if id(node) in self.functions and self.functions[id(node)][3] is node:
                    original, required, ids, func = self.functions[id(node)]
                    out.real.add(node.name)
                    out.origin[node.name] = original
                    if node.name in out.checks:  # defined in two branches (if PY3: ... else:)
                        prev_required, prev_ids = out.checks[node.name]
                        options = out.either.get(node.name, (prev_required,)) + (required,)
                        out.either[node.name] = options
                        required, ids = prev_required, prev_ids | ids
                    out.checks[node.name] = (required, ids)
                    if not (may or func.decorator_list):
                        out.plain.add(node.name)
                    if node.name not in bound:
                        out.conditional.add(node.name)
                elif node.name in self.canaries_in(None):
                    out.canaries.add(node.name)
        for binding, info, mro, tests in entries:
            shared = frozenset().union(*(self.shared.get(id(c), frozenset()) for c in mro))
            for original, definer in tests.items():
                options, ids, func = self.methods[(id(definer), original)]
                key = f"{binding}::{self.names[original]}"
                out.real.add(key)
                out.origin[key] = f"{binding}::{original}"
                out.checks[key] = (options[0], ids | shared)
                if len(options) > 1:
                    out.either[key] = options
                if func.name not in always_bound(definer.node.body):
                    out.conditional.add(key)
                own = definer is info and info.rel == rel
                if own and not (may or info.node.decorator_list or func.decorator_list):
                    out.plain.add(key)
            for c in mro:
                out.canaries |= {f"{binding}::{name}" for name in self.canaries.get(id(c), [])}
        return out

    def imported_keys(self, out: Hardened, tree: ast.Module, found: list, may: bool) -> None:
        """Tests a test module imports from a helper module of the suite (funcy: `from
        .py38_decorators import test_decorator_access_args`): pytest collects them there."""
        bound = always_bound(tree.body)
        for alias, _, func in found:
            original, required, ids, _ = self.functions[id(func)]
            out.real.add(alias.name)
            out.origin[alias.name] = original
            out.checks[alias.name] = (required, ids)
            if not (may or func.decorator_list):
                out.plain.add(alias.name)
            if original not in bound:
                out.conditional.add(alias.name)

    def canaries_in(self, cls) -> list[str]:
        return self.canaries.get(cls, [])


def _is_test(node: ast.AST) -> bool:
    """A function pytest collects as a test (a fixture named test_* is not one: renaming it would
    break the tests that request it; `@pytest.mark.usefixtures(...)` marks a test)."""
    return (
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("test")
        and not is_fixture(node)
    )


class _RenameCalls(ast.NodeTransformer):
    """Loads of renamed module-level test names (`test_is_valid(...)` inside another test)."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            node.id = self.names[node.id]
        return node

    def visit_FunctionDef(self, node):
        """A function's own arguments and local names shadow the module's tests."""
        args = node.args
        local = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not _loads(n)}
        outer = self.names
        self.names = {k: v for k, v in outer.items() if k not in local}
        self.generic_visit(node)
        self.names = outer
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef


def _loads(node: ast.Name) -> bool:
    return isinstance(node.ctx, ast.Load)


def _merge(prev, options: tuple, ids: frozenset, func) -> tuple:
    """(alternative required sets, sealed ids, first node) of a test defined once or in several
    branches of a class-level `if`."""
    if prev is None:
        return options, ids, func
    return prev[0] + options, prev[1] | ids, prev[2]


def _harden_test(func, rewrite):
    """Rewrites one test's asserts, drops its docstring; returns (required sealed ids, all
    sealed ids). The caller renames it."""
    _strip_docstring(func)
    ids = rewrite.collect(func)
    required = set()
    if _always_runs(func):  # sealed asserts among its top-level statements always run
        for stmt in func.body:
            sid = rewrite.sealed_id(stmt)
            if sid is not None:
                required.add(sid)
    return frozenset(required), frozenset(ids)


def _strip_docstring(node) -> None:
    if ast.get_docstring(node, clean=False) is not None:
        node.body = node.body[1:] or [ast.Pass()]


def _guard_unittest_main(tree: ast.Module) -> None:
    """Module-level `unittest.main(...)` (or `main(...)` imported from unittest) statements
    become `if __name__ == "__main__": <the call>` (what the file means when run as a script)."""
    names = {"unittest.main"}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "unittest" and not node.level:
            names |= {a.asname or a.name for a in node.names if a.name == "main"}
    guard = parse_python('if __name__ == "__main__":\n    pass').body[0]
    for i, node in enumerate(tree.body):
        call = node.value if isinstance(node, ast.Expr) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) in names:
            tree.body[i] = ast.copy_location(
                ast.If(test=copy.deepcopy(guard.test), body=[node], orelse=[]), node
            )


def _fresh_name() -> str:
    return f"test_{secrets.token_hex(6)}"


def _after_future_imports(body: list, header: list) -> list:
    split = 0
    for i, node in enumerate(body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            split = i + 1
        elif isinstance(node, ast.Expr) and i == 0 and isinstance(node.value, ast.Constant):
            split = 1  # module docstring
    return body[:split] + header + body[split:]


class _Rewrite(ast.NodeTransformer):
    def __init__(self, eq_name: str, seal_name: str):
        self.eq_name, self.seal_name = eq_name, seal_name
        self.sealed: dict[str, Any] = {}
        self._ids: list[str] = []

    def collect(self, node: ast.AST, skip=None) -> frozenset:
        """Rewrites node's asserts in place (items for which skip() holds are left alone);
        returns the sealed ids made inside."""
        self._ids = []
        if skip is None:
            self.visit(node)
        else:
            self._visit_skipping(node.body, skip)
        return frozenset(self._ids)

    def _visit_skipping(self, body: list, skip) -> None:
        for child in list(body):
            if skip(child):
                continue
            if branches(child):  # a class-level `if`/`try`: tests inside are hardened alone
                for sub in branches(child):
                    self._visit_skipping(sub, skip)
            else:
                self.visit(child)

    def sealed_id(self, stmt: ast.AST) -> str | None:
        if (
            isinstance(stmt, ast.Assert)
            and isinstance(stmt.test, ast.Call)
            and getattr(stmt.test.func, "id", None) == self.seal_name
        ):
            return stmt.test.args[1].value
        return None

    def visit_Expr(self, node: ast.Expr):
        """`self.assertEqual(L, R[, msg])` is hardened as `assert L == R` (same outcome for plain
        values; unittest-style tests get sealed and strict asserts too)."""
        call = node.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "self"
            and call.func.attr in ("assertEqual", "assertEquals")
            and len(call.args) in (2, 3)
            and not call.keywords
            and not any(isinstance(a, ast.Starred) for a in call.args)
        ):
            left, right = call.args[:2]
            msg = call.args[2] if len(call.args) == 3 else None
            test = ast.Compare(left, [ast.Eq()], [right])
            return self.visit_Assert(ast.copy_location(ast.Assert(test, msg), node))
        return self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert):
        test = node.test
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            out = []
            for value in test.values:  # `assert A and B` fails exactly when one part fails
                part = ast.copy_location(ast.Assert(value, copy.deepcopy(node.msg)), node)
                done = self.visit_Assert(part)
                out.extend(done if isinstance(done, list) else [done])
            return out
        if not (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)
            and not any(_is_approx(side) for side in (test.left, test.comparators[0]))
        ):
            return node
        left, right = test.left, test.comparators[0]
        expected = [_constant(side) for side in (left, right)]
        if (expected[0] is _NOT_CONSTANT) != (expected[1] is _NOT_CONSTANT):
            value, side = (
                (expected[0], right) if expected[1] is _NOT_CONSTANT else (expected[1], left)
            )
            sid = secrets.token_hex(8)
            self.sealed[sid] = value
            self._ids.append(sid)
            call = ast.Call(ast.Name(self.seal_name, ast.Load()), [side, ast.Constant(sid)], [])
            return ast.copy_location(ast.Assert(call, None), node)  # msg may show the expected
        call = ast.Call(ast.Name(self.eq_name, ast.Load()), [left, right], [])
        return ast.copy_location(ast.Assert(call, node.msg), node)


def _is_approx(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "approx"


# ---------------------------------------------------------------- constant expressions

_NOT_CONSTANT = object()
_CONSTANT_TYPES = (int, float, complex, str, bytes, bool, type(None))
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
_UNARYOPS = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Not: operator.not_,
    ast.Invert: operator.inv,
}
_SIZE = 1 << 16  # largest str/bytes/container length (or int bit length) an expression may build


class _NotConstant(Exception):
    pass


def _constant(node: ast.AST):
    """The value of a closed constant expression (literals, containers, arithmetic), or
    _NOT_CONSTANT. Evaluated here on the host, node by node; nothing is imported or called."""
    try:
        return _evaluate(node)
    except (_NotConstant, ArithmeticError, TypeError, ValueError, RecursionError):
        return _NOT_CONSTANT


def _evaluate(node: ast.AST):
    if isinstance(node, ast.Constant):
        if type(node.value) not in _CONSTANT_TYPES:  # Ellipsis
            raise _NotConstant
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_evaluate(e) for e in node.elts]  # a Starred element is not a constant
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        return kind(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # {**other}
            raise _NotConstant
        return {_evaluate(k): _evaluate(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARYOPS:
        return _bounded(_UNARYOPS[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _check_cost(node.op, left, right)
        return _bounded(_BINOPS[type(node.op)](left, right))
    raise _NotConstant


def _check_cost(op: ast.operator, left, right) -> None:
    """Refuses operations whose result could be huge (10 ** 10 ** 9, "x" * 10 ** 9,
    1 << 10 ** 9)."""
    if isinstance(op, ast.Pow) and isinstance(left, int) and isinstance(right, int):
        if right > 0 and abs(left) > 1 and right * abs(left).bit_length() > _SIZE:
            raise _NotConstant
    if isinstance(op, ast.LShift) and isinstance(right, int) and right > _SIZE:
        raise _NotConstant
    if isinstance(op, ast.Mult):
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int):
                if len(seq) * n > _SIZE:
                    raise _NotConstant


def _bounded(value):
    if isinstance(value, int) and value.bit_length() > _SIZE:
        raise _NotConstant
    return value


# ---------------------------------------------------------------- canaries


def _always_runs(func: ast.FunctionDef) -> bool:
    """No `return`, `yield` in the test itself (nested functions and classes do not count)."""
    todo = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return True


def _make_canary(
    func: ast.FunctionDef, rewrite: _Rewrite, canary_seals: set, compare_mutation: bool
) -> ast.FunctionDef:
    canary = copy.deepcopy(func)
    canary.name = _fresh_name()
    for node in ast.walk(canary):  # its sealed asserts record under ids of their own
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == rewrite.seal_name:
            sid = secrets.token_hex(8)
            node.args[1] = ast.Constant(sid)
            canary_seals.add(sid)
    eq_asserts = [
        i
        for i, stmt in enumerate(canary.body)
        if isinstance(stmt, ast.Assert)
        and isinstance(stmt.test, ast.Call)
        and getattr(stmt.test.func, "id", None) in (rewrite.eq_name, rewrite.seal_name)
    ]
    if compare_mutation and eq_asserts:
        stmt = canary.body[eq_asserts[-1]]
        sentinel = ast.Call(ast.Name("object", ast.Load()), [], [])
        # L == object(): false for every honest L (in-process, even where L was sealed)
        stmt.test = ast.Call(
            ast.Name(rewrite.eq_name, ast.Load()), [stmt.test.args[0], sentinel], []
        )
    else:
        a = secrets.randbelow(1 << 30)
        false = ast.Call(
            ast.Name(rewrite.eq_name, ast.Load()), [ast.Constant(a), ast.Constant(a + 1)], []
        )
        canary.body.append(ast.Assert(false, None))
    return ast.fix_missing_locations(canary)


# ---------------------------------------------------------------- test functions (also used by
# the DevOps grader and the repository miner, which sit above this module)


def iter_tests(tree: ast.Module):
    """(key as pytest names it after "::", node) of every test function and method (those under
    module- or class-level `if`/`try`/`with` blocks too: one key may come twice, once per
    branch)."""
    for node in flat(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and any(node is top for top in tree.body):
            for item in flat(node.body):
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    yield f"{node.name}::{item.name}", item


def drop_tests(source: str, keys: set[str]) -> str:
    """`source` without the named tests (their decorators too); a class left without a body
    keeps `pass`; a test a class inherits is dropped by shadowing (`_shadow_inherited`)."""
    if not keys:
        return source
    out = _drop_defined(source, keys)
    inherited = keys - {k for k, _ in iter_tests(parse_python(source))}
    return _shadow_inherited(out, parse_python(out), inherited) if inherited else out


def _drop_defined(source: str, keys: set[str]) -> str:
    tree = parse_python(source)
    spans = []
    for key, node in iter_tests(tree):
        if key in keys:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            spans.append((first, node.end_lineno, node.col_offset))
    lines = source.splitlines(keepends=True)
    for first, last, _ in sorted(spans, reverse=True):
        lines[first - 1 : last] = []
    out = "".join(lines)
    try:
        parse_python(out)
        return out
    except SyntaxError:  # an emptied class: keep it with `pass`
        lines = source.splitlines(keepends=True)
        for first, last, col in sorted(spans, reverse=True):
            lines[first - 1 : last] = [" " * col + "pass\n"]
        return "".join(lines)


def _shadow_inherited(source: str, tree: ast.Module, keys: set[str]) -> str:
    """Tests a class of this module inherits ("Class::test_x" not defined in it) are dropped by
    a `test_x = None` line at the top of the class body (pytest and unittest collect only
    callables); the lines of the file above stay where they are."""
    lines = source.splitlines(keepends=True)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    inserts = []
    for key in sorted(keys):
        cls, _, name = key.partition("::")
        if cls in classes and name and "::" not in name:
            node = classes[cls]
            first = node.body[0]
            at = min([d.lineno for d in getattr(first, "decorator_list", [])] + [first.lineno])
            inserts.append((at, " " * first.col_offset + f"{name} = None\n"))
    for at, line in sorted(inserts, reverse=True):
        lines.insert(at - 1, line)
    return "".join(lines)

"""What pytest collects from a suite of test files, found statically (nothing is imported or run).

The grader renames every test before a run, so it must know every test id pytest will report,
whatever style the tests are written in. This module reads the hidden test modules and their
support modules (a tests package's `__init__.py`, helper modules beside the tests) and answers:

- which classes a test module exposes to pytest, under which names (pytest collects every class
  in the module's namespace: defined there or imported): a `Test*` class without `__init__`, or a
  `unittest.TestCase` subclass under any name, unless `__test__ = False`;
- each collected class's test methods through inheritance (C3 order, as Python resolves them):
  methods defined in the class, in mixins and base classes of the same file, of the tests
  package's `__init__.py` or of a helper module, and `test_x = None` removing an inherited one;
- tests defined inside module- or class-level `if` / `try` / `with` blocks (six's
  `if PY3: def test_b(): ... else: def test_b(): ...`): every branch is read, and a test that
  is not bound on every path through them is `conditional` (it may be absent from a run).

Base classes are resolved through `import` / `from ... import` statements between the suite's
files. A base found nowhere in the suite (the project's own code, a third-party helper) is
`unresolved`: it contributes no known tests, so a test it brings is an id the grader does not
know, which it treats as forged (fail closed); the gate names such bases in its reason. A base
whose name ends in `TestCase` (unittest, absltest, django) counts as unittest's.
"""

from __future__ import annotations

import ast
import dataclasses
import posixpath

TESTCASE = "TestCase"  # the resolved value of unittest.TestCase and its look-alikes


@dataclasses.dataclass(eq=False)
class ClassInfo:
    rel: str  # file it is defined in
    node: ast.ClassDef


def is_test_name(name: str) -> bool:
    return name.startswith("test")


BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()
)


def branches(stmt: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists a module- or class-level block may run (every branch)."""
    if isinstance(stmt, ast.If):
        return [stmt.body, stmt.orelse]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [stmt.body]
    if isinstance(stmt, BLOCKS):  # try / try*
        return [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
    return []


def flat(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module or class body's statements with those inside its `if`/`try`/`with` blocks
    (every branch), in source order: what a definition found at run time may be."""
    out = []
    for stmt in body:
        out.append(stmt)
        for sub in branches(stmt):
            out += flat(sub)
    return out


def always_bound(body: list[ast.stmt]) -> set[str]:
    """Names of functions, classes, imports and plain assignments a body binds on every path
    through its blocks (an `if` binds what both branches bind; a `try` what its body and every
    handler do)."""
    names = set()
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
        elif isinstance(stmt, ast.If):
            names |= always_bound(stmt.body) & always_bound(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            names |= always_bound(stmt.body)
        elif isinstance(stmt, BLOCKS):
            paths = [always_bound(stmt.body + stmt.orelse)]
            paths += [always_bound(h.body) for h in stmt.handlers]
            names |= set.intersection(*paths) | always_bound(stmt.finalbody)
    return names


def defines(node: ast.ClassDef) -> dict[str, str]:
    """name -> "test" | "none" | "init" | "notest" for what the class body itself binds (inside
    its `if`/`try`/`with` blocks too: the last binding in source order wins)."""
    out = {}
    for stmt in flat(node.body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if stmt.name in ("__init__", "__new__"):
                out[stmt.name] = "init"
            elif is_test_name(stmt.name) and not is_fixture(stmt):
                out[stmt.name] = "test"
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name) and is_test_name(target.id):
                    none = isinstance(stmt.value, ast.Constant) and stmt.value.value is None
                    out[target.id] = "none" if none else "other"
                elif isinstance(target, ast.Name) and target.id == "__test__":
                    falsy = isinstance(stmt.value, ast.Constant) and not stmt.value.value
                    out["__test__"] = "notest" if falsy else "test"
    return out


def is_fixture(func) -> bool:
    """Decorated with `fixture` / `pytest.fixture(...)` (not `pytest.mark.usefixtures`, which
    marks a test)."""
    for dec in func.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("fixture", "yield_fixture"):
            return True
    return False


class Suite:
    """The suite's modules (rel -> parsed tree) with class and import resolution."""

    def __init__(self, trees: dict[str, ast.Module]):
        self.trees = trees
        self.classes: dict[tuple[str, str], ClassInfo] = {}
        for rel, tree in trees.items():
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes[(rel, node.name)] = ClassInfo(rel, node)
        self.unresolved: dict[int, list[str]] = {}  # id(ClassInfo) -> bases found nowhere

    # ------------------------------------------------------------ modules and names

    def module_file(self, importer: str, level: int, module: str | None) -> str | None:
        """The suite file an import names, or None (outside the suite)."""
        parts = module.split(".") if module else []
        if level:
            base = posixpath.dirname(importer)
            for _ in range(level - 1):
                base = posixpath.dirname(base)
            roots = [base]
        else:  # rootdir imports, or the test dir itself on sys.path (a tests dir without
            roots = ["", posixpath.dirname(importer)]  # __init__.py: pytest prepends it)
        for root in roots:
            stem = posixpath.join(root, *parts) if parts else root
            for rel in (f"{stem}.py", posixpath.join(stem, "__init__.py")):
                if stem and rel in self.trees:
                    return rel
        return None

    def lookup(self, rel: str, name: str, depth: int = 0):
        """What `name` is bound to at the top of module `rel`: a ClassInfo, TESTCASE,
        ("module", rel) or None."""
        if depth > 8:
            return None
        found = None
        for node in self.trees[rel].body:  # the last binding wins, as at run time
            if isinstance(node, ast.ClassDef) and node.name == name:
                found = self.classes[(rel, name)]
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        found = self._from_import(rel, node, alias.name, depth)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if (alias.asname or alias.name.split(".")[0]) == name:
                        target = alias.name if alias.asname else name
                        mod = self.module_file(rel, 0, target)
                        found = ("module", mod) if mod else ("external", target)
        return found

    def _from_import(self, rel: str, node: ast.ImportFrom, name: str, depth: int):
        mod = self.module_file(rel, node.level, node.module)
        if mod is not None:
            hit = self.lookup(mod, name, depth + 1)
            if hit is not None:
                return hit
            sub = self.module_file(rel, node.level, f"{node.module or ''}.{name}".strip("."))
            if sub is not None:
                return ("module", sub)
        return TESTCASE if name.endswith("TestCase") else None

    def resolve(self, rel: str, expr: ast.expr):
        if isinstance(expr, ast.Name):
            return self.lookup(rel, expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(rel, expr.value)
            if isinstance(owner, tuple) and owner[0] == "module":
                hit = self.lookup(owner[1], expr.attr)
                if hit is not None:
                    return hit
            if expr.attr.endswith("TestCase"):
                return TESTCASE
        return None

    # ------------------------------------------------------------ classes

    def bases(self, info: ClassInfo) -> list:
        out, missing = [], []
        for expr in info.node.bases:
            hit = self.resolve(info.rel, expr)
            if isinstance(hit, ClassInfo) or hit == TESTCASE:
                out.append(hit)
            elif ast.unparse(expr) not in ("object", "abc.ABC", "ABC"):
                missing.append(ast.unparse(expr))
        self.unresolved[id(info)] = missing
        return out

    def mro(self, info: ClassInfo, depth: int = 0) -> list:
        """C3 linearization over the suite's classes (TESTCASE is a leaf)."""
        if depth > 32:
            raise ValueError(f"class hierarchy of {info.node.name} is too deep or cyclic")
        bases = self.bases(info)
        seqs = [self.mro(b, depth + 1) if isinstance(b, ClassInfo) else [b] for b in bases]
        seqs.append(list(bases))
        out = [info]
        while any(seqs):
            for seq in seqs:
                head = seq[0] if seq else None
                if head is not None and not any(head in s[1:] for s in seqs):
                    break
            else:
                raise ValueError(f"no consistent method order for class {info.node.name}")
            out.append(head)
            seqs = [s[1:] if s and s[0] is head else s for s in seqs]
        return out

    def tests_of(self, info: ClassInfo) -> dict[str, ClassInfo]:
        """Test method name -> the class in the MRO that defines it (what pytest runs)."""
        seen, out = set(), {}
        for cls in self.mro(info):
            if not isinstance(cls, ClassInfo):
                continue
            for name, kind in defines(cls.node).items():
                if is_test_name(name) and name not in seen:
                    seen.add(name)
                    if kind == "test":
                        out[name] = cls
        return out

    def is_collected(self, binding: str, info: ClassInfo) -> bool:
        mro = self.mro(info)
        flags = {}
        for cls in reversed(mro):
            if isinstance(cls, ClassInfo):
                flags.update(defines(cls.node))
        if flags.get("__test__") == "notest":
            return False
        if TESTCASE in mro:
            return True
        return binding.startswith("Test") and "init" not in (
            defines(c.node).get("__init__") for c in mro if isinstance(c, ClassInfo)
        )

    def collected(self, rel: str) -> list[tuple[str, ClassInfo]]:
        """(name in the module, class) of every class pytest collects from test module `rel`."""
        names = []
        for node in self.trees[rel].body:
            if isinstance(node, ast.ClassDef):
                names.append(node.name)
            elif isinstance(node, ast.ImportFrom):
                names += [a.asname or a.name for a in node.names if a.name != "*"]
        out = []
        for name in dict.fromkeys(names):
            hit = self.lookup(rel, name)
            if isinstance(hit, ClassInfo) and self.is_collected(name, hit):
                out.append((name, hit))
        return out

    def unresolved_bases(self, info: ClassInfo) -> list[str]:
        out = []
        for cls in self.mro(info):
            if isinstance(cls, ClassInfo):
                out += self.unresolved.get(id(cls), [])
        return out

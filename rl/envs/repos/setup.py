"""The setup agent: turns a repository into a proposed EnvSpec by working in the sandbox through the
same tool protocol as every coding episode (rl/envs/agent/tools.py), then the gate (spec.admit)
decides.

    env = SetupEnv(tok)                                   # a CodingEnv that ends without grading
    record = run_episode(env, setup_task(name, files), ScriptedSetupPolicy(tok))
    env.proposal                                          # the .rl_env.json it wrote, validated
    admission = setup_repo(name, files, tok)              # both steps + the gate

The default policy is scripted (`ScriptedSetupPolicy`): it lists the files, reads pyproject.toml,
setup.cfg, tox.ini, setup.py and the README, links a src/ layout's package to the root (the tests
and the grader import from the repo root), checks that the declared dependencies import offline
(what the machine has: the sandbox sees the host's Python read-only, with no network), tries the
test commands the configuration names and repairs by rules (addopts naming plugins that are not
installed, a runner that is not installed, test files pytest does not collect by name), lists the
test files with --collect-only, writes its proposal to SPEC_FILE and submits. Any policy can take
its place: it gets the same prompt and tools, and its proposal passes the same gate.
"""

from __future__ import annotations

import json
import re
import shlex

from data.chat import tool_call_text
from data.tokenizers import Tokenizer
from rl.envs.agent.env import CodingEnv, run_episode
from rl.envs.grading.tasks import Task
from rl.envs.repos.dep_fetch import missing_modules
from rl.envs.repos.spec import (
    SETUP_TIMEOUT_S,
    SPEC_FILE,
    TEST_TIMEOUT_S,
    Admission,
    EnvSpec,
    admit,
)

SETUP_PROMPT = (
    "Set up this repository as a test environment, offline (no network, nothing to install from "
    "outside). Find how its tests run and make them run. Then write "
    f'{SPEC_FILE} as {{"setup": [shell commands to run first], "test_command": "...", '
    '"test_files": [test modules], "notes": [what you found]}} and submit.'
)
# A note that explains why setup cannot succeed starts with this; the first one is the reason a
# rejection gives the user (its root cause: a C extension that does not build comes before the
# test command that then cannot import it).
PROBLEM = "problem: "
# What a test run prints when a test reaches for the network (the sandbox has none).
NETWORK_ERRORS = (
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Network is unreachable",
    "nodename nor servname",
)
CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini", "setup.py", "pytest.ini")
PYTEST = "python3 -m pytest -q"


def setup_task(name: str, files: dict[str, str], test_deps: list[str] | None = None) -> Task:
    """`test_deps`: the pinned test dependencies its sandbox mounts (repos/dep_fetch.py)."""
    meta = {"project": name, **({"test_deps": list(test_deps)} if test_deps else {})}
    return Task(
        id=f"setup-{name}",
        prompt=SETUP_PROMPT,
        files=files,
        hidden_tests={},
        solution={},
        kind="setup",
        meta=meta,
    )


class SetupEnv(CodingEnv):
    """A CodingEnv whose episode ends by reading the agent's proposal instead of grading.
    `proposal`: the validated dict, or None with `problem` saying why."""

    def __init__(self, tok: Tokenizer, **kwargs):
        kwargs.setdefault("max_turns", 40)
        kwargs.setdefault("command_timeout_s", SETUP_TIMEOUT_S)
        kwargs.setdefault("test_timeout_s", TEST_TIMEOUT_S)
        kwargs.setdefault("obs_token_budget", 4096)
        super().__init__(tok, **kwargs)
        self.proposal: dict | None = None
        self.raw = None  # what the agent wrote, parsed but not validated (kept when rejected)
        self.problem = ""
        self.missing_modules: set[str] = set()  # "No module named 'X'" in any tool output

    def _run_items(self, parsed):
        observations, submitted = super()._run_items(parsed)
        for text in observations:
            self.missing_modules |= missing_modules(text)
        return observations, submitted

    def _finish(self, reason: str) -> None:
        self._record.done_reason = reason
        self.proposal, self.problem = None, ""
        raw = None
        try:
            raw = self.raw = json.loads(self.sandbox.read_text(SPEC_FILE))
            self.proposal = validate_proposal(raw)
        except OSError:
            self.problem = f"the setup agent wrote no {SPEC_FILE}"
        except ValueError as e:
            notes = raw.get("notes") if isinstance(raw, dict) else None
            notes = [str(n) for n in notes] if isinstance(notes, list) else []
            found = [n.removeprefix(PROBLEM) for n in notes if n.startswith(PROBLEM)]
            last = f" (its last note: {notes[-1][:200]})" if notes else ""
            # what the agent found comes first: it is what the user can act on
            proposal = f"{SPEC_FILE}: {e}"
            self.problem = f"{found[0][:400]} ({proposal})" if found else f"{proposal}{last}"
        self.close()


def validate_proposal(obj) -> dict:
    """The proposal as plain fields, or ValueError naming what is wrong (it is untrusted)."""
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    setup, command, tests = obj.get("setup", []), obj.get("test_command"), obj.get("test_files")
    if not isinstance(setup, list) or not all(isinstance(s, str) for s in setup):
        raise ValueError("'setup' must be a list of shell commands")
    if not isinstance(command, str) or not command.strip():
        raise ValueError("'test_command' must be a non-empty string")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise ValueError("'test_files' must be a non-empty list of paths")
    notes = [str(n) for n in obj.get("notes", [])] if isinstance(obj.get("notes"), list) else []
    return {"setup": setup, "test_command": command, "test_files": tests, "notes": notes}


def setup_repo(
    name: str, files: dict[str, str], tok: Tokenizer, policy=None, source: str = ""
) -> Admission:
    """Setup agent (scripted by default) -> proposal -> the gate."""
    env = SetupEnv(tok)
    run_episode(env, setup_task(name, files), policy or ScriptedSetupPolicy(tok))
    if env.proposal is None:
        return Admission(name, False, env.problem, None)
    p = env.proposal
    spec = EnvSpec(name, p["setup"], p["test_command"], p["test_files"], source=source)
    spec.notes = p["notes"]
    return admit(files, spec)


# ---------------------------------------------------------------- the scripted policy


def last_observation(tok: Tokenizer, context: list[int]) -> str:
    """Text of the last tool result in `context` ("" before the first)."""
    open_, close = tok.special_id("tool_result"), tok.special_id("/tool_result")
    starts = [i for i, t in enumerate(context) if t == open_]
    if not starts:
        return ""
    start = starts[-1] + 1
    end = context.index(close, start) if close in context[start:] else len(context)
    return tok.decode(context[start:end])


class ScriptedSetupPolicy:
    """`policy(context_ids) -> emitted_ids`: one tool call per turn, chosen from what the previous
    observations said (a generator holds the plan; see the module docstring)."""

    def __init__(self, tok: Tokenizer, test_timeout_s: float = TEST_TIMEOUT_S):
        self.tok = tok
        self.test_timeout_s = test_timeout_s
        self._plan = self._steps()
        self._started = False
        self._last_output = ""
        self._main_modules: list[str] = []  # test modules that run unittest.main() at import

    def __call__(self, context: list[int]) -> list[int]:
        if self._started:
            name, args = self._plan.send(last_observation(self.tok, context))
        else:
            self._started = True
            name, args = next(self._plan)
        ids = self.tok.encode(tool_call_text(name, args), allow_special=True)
        return ids + [self.tok.special_id("end")]

    def _steps(self):
        files = (yield ("list_files", {})).splitlines()
        texts = {}
        for name in CONFIG_FILES:
            if name in files:
                texts[name] = yield ("read_file", {"path": name})
        for name in files:
            if re.fullmatch(r"README(\.\w+)?", name):
                texts[name] = yield ("read_file", {"path": name, "start_line": 1, "end_line": 60})
                break
        setup, notes = [], []
        for pkg in src_packages(files) + src_modules(files):
            command = f"ln -s src/{pkg} {pkg}"
            if (yield ("run", {"command": command})).startswith("[ok]"):
                setup.append(command)
                notes.append(f"src layout: linked src/{pkg} to the root (tests import from there)")
        if builds_extension(files, texts):
            command = "python3 setup.py -q build_ext --inplace"
            out = yield ("run", {"command": command, "timeout_s": self.test_timeout_s})
            if out.startswith("[ok]"):
                setup.append(command)
                notes.append("C extension: built in place (setup.py build_ext --inplace)")
            else:
                notes.append(
                    f"{PROBLEM}the C extension does not build ({_first_error(out)}): make it build "
                    "offline with the compiler and headers here, or give it a pure-Python fallback"
                )
        for dist, module in declared_dependencies(texts):
            probe = f"python3 -c 'import {module}'"
            if not (yield ("run", {"command": probe})).startswith("[ok]"):
                notes.append(
                    f"dependency {dist} does not import offline: its tests fail at baseline"
                )
        command = None
        for candidate, note in test_commands(texts):
            tried = len(notes)
            found = yield from self._try_command(candidate, files, notes)
            if found:
                command = found
                # a candidate that failed before this one is no reason to reject: only a note
                notes[:tried] = [n.replace(PROBLEM, "tried: ", 1) for n in notes[:tried]]
                if "pytest" in found or "pytest" not in candidate:  # else the repairs say it
                    notes.append(note)
                offline = network_error(self._last_output)
                if offline:
                    notes.append(network_note(offline))
                break
        tests = []
        if command:
            tests = yield from self._test_files(command, notes)
        proposal = {"setup": setup, "test_command": command or "", "test_files": tests}
        proposal["notes"] = notes
        yield ("write_file", {"path": SPEC_FILE, "content": json.dumps(proposal, indent=1)})
        yield ("submit", {})

    def _test_files(self, command: str, notes: list[str]):
        """Test modules the command collects that define tests. `-q -q -q` gives one short
        "path: N" line per file (a config's `-v` or a long per-test listing would be trimmed to
        fit the observation, leaving fragments such as "s/tests.py"); a module pytest collects
        only doctests from (--doctest-modules) is left out: the grader runs test functions."""
        found = []
        if "pytest" in command:
            collected = yield ("run", {"command": f"{command} --collect-only -q -q -q"})
            found = collected_files(collected)
        found = sorted(set(found) | set(self._main_modules))  # run by `python3 -m`, not pytest
        if not found:
            return []
        paths = " ".join(shlex.quote(f) for f in found)
        pattern = r"^[[:space:]]*((async )?def test|class [A-Za-z0-9_]*Test)"
        listed = yield ("run", {"command": f"grep -l -E '{pattern}' -- {paths}"})
        kept = [f for f in found if f in listed.splitlines()]
        if len(kept) < len(found):
            left = sorted(set(found) - set(kept))
            notes.append(f"not graded: {left} (no test functions or classes: doctests only)")
        return kept

    def _try_command(self, command: str, files: list[str], notes: list[str]):
        """Runs `command`, repairing it by rule until tests run (returns it) or no rule applies."""
        cause = ""  # why test modules were left out: the reason when none is left to run
        for _ in range(4):
            out = yield ("run", {"command": command, "timeout_s": self.test_timeout_s})
            self._last_output = out
            if tests_ran(out):
                return command
            offline = network_error(out)
            if offline:  # every test that ran failed, some for want of the network
                notes.append(network_note(offline))
                return None
            if out.startswith("[timeout]"):
                limit = f"{self.test_timeout_s:.0f} s"
                notes.append(
                    f"{PROBLEM}{command!r} did not finish in {limit}: the tests hang (or wait on "
                    "the network)"
                )
                return None
            repaired = self._run_main_modules(command, out, files)
            repaired = repaired or repair(command, out, files)
            if repaired is None:
                if cause and "no tests ran" in out:  # every module was left out: say why
                    command, why = command.split(" --ignore=", 1)[0], cause
                else:
                    why = why_not_run(out)
                notes.append(f"{PROBLEM}{command!r} does not run the tests: {why}")
                return None
            if "--ignore=" in repaired[0] and "--ignore=" not in command:
                cause = why_not_run(out)
            command, why = repaired
            notes.append(why)
        return None

    def _run_main_modules(self, command: str, out: str, files: list[str]):
        """Test modules that call unittest.main() at import (toposort) abort pytest's collection:
        pytest leaves them out (--ignore=); when nothing else is left to run, they run as the
        project runs them, `python3 -m dotted.name` (unittest's own exit status: 0 or 1). Either
        way they stay test files: the grader guards the call (harden._guard_unittest_main)."""
        if "pytest" not in command:
            return None
        mains = [f for f in main_at_import(out, files) if f not in self._main_modules]
        if mains:
            self._main_modules += mains
            ignore = "".join(f" --ignore={shlex.quote(f)}" for f in mains)
            why = (
                f"test modules that call unittest.main() at import (outside `if __name__ == "
                f"'__main__':`), which aborts pytest's collection: {mains}: left out of pytest "
                "(still test files: the grader guards that call)"
            )
            return command + ignore, why
        if self._main_modules and ("no tests ran" in out or "exit_code=5" in out):
            runs = " && ".join(f"python3 -m {module_name(f)}" for f in self._main_modules)
            return runs, f"no other test module: the test command runs them ({runs})"
        return None


def main_at_import(out: str, files: list[str]) -> list[str]:
    """Repository files whose module-level code called unittest.main() while pytest imported
    them: the traceback's `File "<path>", line N, in <module>` followed by the call."""
    if "SystemExit" not in out:
        return []
    found = []
    pattern = r'File "([^"]+\.py)", line \d+, in <module>\n\S*\s*(?:unittest\.)?main\('
    for path in re.findall(pattern, out):
        match = [f for f in files if path == f or path.endswith("/" + f)]
        if match:
            best = max(match, key=len)
            if best not in found:
                found.append(best)
    return found


def module_name(path: str) -> str:
    """The dotted name `python3 -m` runs a repository file under, from the root."""
    return path.removesuffix(".py").replace("/", ".")


def builds_extension(files: list[str], texts: dict[str, str]) -> bool:
    """setup.py declares a compiled extension (Extension(...) / ext_modules, or Cython sources)."""
    setup_py = texts.get("setup.py", "")
    return bool(setup_py) and (
        "Extension(" in setup_py
        or "ext_modules" in setup_py
        or any(f.endswith(".pyx") for f in files)
    )


def network_error(output: str) -> str:
    """The first line of a test run's output that says a test reached for the network ("")."""
    for line in output.splitlines():
        if any(sig in line for sig in NETWORK_ERRORS):
            return re.sub(r"^E\s+", "", line.strip())[:160]  # pytest's "E   " marker dropped
    return ""


def network_note(line: str) -> str:
    return (
        f"{PROBLEM}tests need the network, which the sandbox does not have ({line}): make them "
        "skip when offline"
    )


def src_packages(files: list[str]) -> list[str]:
    """Packages under src/ with no copy at the root (a tests package is not one: pytest finds
    it from its test files, and the grader installs its own copy)."""
    pkgs = {m.group(1) for f in files if (m := re.fullmatch(r"src/(\w+)/__init__\.py", f))}
    return sorted(p for p in pkgs if f"{p}/__init__.py" not in files and not p.startswith("test"))


def src_modules(files: list[str]) -> list[str]:
    """Single-module src layouts (src/roman.py in roman 4.2's sdist): `name.py` files under src/
    that are not tests or build scripts and have no copy at the root. pytest finds them from a
    test beside them (it puts src/ on sys.path); the grader, running the tests under other
    paths, imports from the root only."""
    out = []
    for f in files:
        m = re.fullmatch(r"src/(\w+\.py)", f)
        name = m.group(1) if m else ""
        test_like = name.startswith("test") or name.endswith("_test.py") or name == "conftest.py"
        if m and not test_like and name != "setup.py" and name not in files:
            out.append(name)
    return sorted(out)


def declared_dependencies(texts: dict[str, str]) -> list[tuple[str, str]]:
    """(distribution, module guess) of the runtime dependencies the configuration declares."""
    found = []
    for text in texts.values():
        for block in re.findall(r"(?:install_requires|dependencies)\s*=\s*\[([^\]]*)\]", text):
            found += re.findall(r"[\"']([A-Za-z0-9_.\-]+)", block)
        m = re.search(r"install_requires\s*=\s*\n((?:[ \t]+\S.*\n)+)", text)
        if m:
            found += [line.strip() for line in m.group(1).splitlines() if line.strip()]
    out = []
    for dep in found:
        dist = re.split(r"[<>=!~;\[ ]", dep, maxsplit=1)[0]
        if dist and (dist, dist) not in out:
            out.append((dist, dist.lower().replace("-", "_")))
    return out


def test_commands(texts: dict[str, str]) -> list[tuple[str, str]]:
    """Test commands to try, most specific first: the tox testenv's runner, then pytest."""
    out = []
    for line in tox_commands(texts.get("tox.ini", "")):
        if re.match(r"(coverage run\b.*-m\s+)?(py\.test|pytest)\b", line):
            out.append((PYTEST, "tox.ini runs pytest"))
        else:
            out.append((line, "tox.ini names the test runner"))
    out.append((PYTEST, "pytest runs the tests"))
    seen, unique = set(), []
    for command, note in out:
        if command not in seen:
            seen.add(command)
            unique.append((command, note))
    return unique


def tox_commands(tox: str) -> list[str]:
    """The first testenv's commands: continuation lines joined, `{posargs}` dropped, and a tox
    factor condition (`py27: ...`, `{py27,py36}-full: ...`, munch's) taken off the front."""
    m = re.search(r"^commands\s*=[ \t]*(.*)\n((?:[ \t]+\S.*(?:\n|$))*)", tox, flags=re.M)
    if not m:
        return []
    text = re.sub(r"\s*\\\n\s*", " ", m.group(1) + "\n" + m.group(2))
    out = []
    for line in text.splitlines():
        line = re.sub(r"\{posargs[^}]*\}", "", line).strip()
        line = re.sub(r"^[\w{},.\-]+:\s+", "", line)  # a factor condition
        if line and not line.startswith(("#", ";")) and line not in out:
            out.append(line)
    return out


def tests_ran(observation: str) -> bool:
    observation = re.sub(r"\x1b\[[0-9;]*m", "", observation)  # addopts may force --color=yes
    head = observation.split("\n", 1)[0]
    ran = r"\b\d+ passed\b|^Ran [1-9]\d* tests? in "  # pytest's summary, or unittest's
    return head in ("[ok] exit_code=0", "[exit:1] exit_code=1") and bool(
        re.search(ran, observation, flags=re.M)
    )


def repair(command: str, out: str, files: list[str]) -> tuple[str, str] | None:
    """(repaired command, why) for a failure a rule knows, else None."""
    if "pytest" in command and "unrecognized arguments" in out and "addopts=" not in command:
        return (
            command + " -o addopts=",
            "the pytest config's addopts name plugins not installed here (e.g. --cov): overridden",
        )
    broken = sorted(set(re.findall(r"^ERROR (\S+\.py)\b", out, flags=re.M)))
    broken = [f for f in broken if f in files and f"--ignore={f}" not in command]
    if "pytest" in command and "during collection" in out and broken:
        # funcy: 3 of 15 modules import a package not installed offline; the rest still run
        ignore = "".join(f" --ignore={shlex.quote(f)}" for f in broken)
        why = f"left out test modules that do not import here: {broken} ({why_not_run(out)})"
        return command + ignore, why
    not_installed = ("command not found", "not found", "No module named")
    if "pytest" not in command and any(s in out for s in not_installed):
        return PYTEST, f"{command.split()[0]} is not installed offline: pytest runs the tests"
    if "pytest" in command and ("no tests ran" in out or "exit_code=5" in out):
        odd = [f for f in files if re.fullmatch(r"(.*/)?\w*tests?\.py", f) and "/test_" not in f]
        odd = [f for f in odd if not f.split("/")[-1].startswith("test_")]
        if odd and not any(f in command for f in odd):
            return command + " " + " ".join(
                odd
            ), f"test modules pytest does not collect by name: {odd}"
    return None


def collected_files(output: str) -> list[str]:
    """Test module paths from `pytest -q --collect-only -q` output ("path: N" lines; "path::test"
    with a single -q)."""
    found = set()
    for line in output.splitlines():
        m = re.fullmatch(r"(\S+\.py)(?:: \d+|::\S.*)", line.strip())
        if m:
            found.add(m.group(1))
    return sorted(found)


def _first_error(out: str) -> str:
    """The first line that says error (a compiler's names the file and line), else the last."""
    for line in out.splitlines():
        if re.search(r"error\b", line, flags=re.I) and not line.startswith("["):
            return line.strip()[:200]
    return _last(out)


def why_not_run(out: str) -> str:
    """What stopped a test run, in words a user can act on: the first collection error with
    its file (a test dependency not installed here, a module that exits at import), else the
    run's last line."""
    where = re.search(r"^ERROR (\S+\.py)\b", out, flags=re.M)
    error = re.search(r"^E\s+(\w+(?:Error|Exception)\b.*)$", out, flags=re.M)
    missing = re.search(r"No module named '([\w.]+)'", out)
    place = f"{where.group(1)}: " if where else ""
    if missing:
        return (
            f"{place}the tests import {missing.group(1)}, which is not installed here (the sandbox "
            "is offline and installs nothing): install it where this machine's Python imports "
            "it, or make those tests skip without it"
        )
    if "caught unexpected SystemExit" in out:
        return (
            "a test module exits while pytest imports it (e.g. unittest.main() outside "
            "`if __name__ == '__main__':`): guard that call"
        )
    if error:
        return f"{place}{error.group(1)[:200]} ({_last(out)})"
    return _last(out)


def _last(out: str) -> str:
    lines = [line for line in out.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"

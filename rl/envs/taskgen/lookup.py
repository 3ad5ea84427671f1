"""Long-context template: the fix needs one fact from each of several long files, more text than a
small context holds at once (the self-summarization family: rl/envs/agent/summary.py).

    docs/part_<i>.md, i = 1..N          long notes, each hiding one line "The <word> code is <n>."
    <pkg>/access.py                    ACCESS = ""  -> the N codes in order, joined by "-"

An agent reads every part (or greps, if it knows to), and a context too small for all of them
must carry the codes it found across a summary. meta["read_first"] lists the parts (the scripted
oracle reads them before the edit); meta["facts"] says what each part shows (its summaries quote
them): neither is visible to the policy.
"""

from __future__ import annotations

from rl.envs.taskgen.helpers import base_repo, pick_prompt

WORDS = (
    "the ledger",
    "a shipment",
    "the nightly job",
    "this module",
    "the old cache",
    "every invoice",
    "the audit",
    "a retry",
    "the exporter",
    "the schema",
)
VERBS = ("was moved", "is checked", "gets rebuilt", "was renamed", "is logged", "gets retried")
WHEN = ("after the release", "on Mondays", "before the migration", "at startup", "by hand")
CODE_NAMES = ("amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor")


def _filler_line(rng) -> str:
    return f"{rng.choice(WORDS).capitalize()} {rng.choice(VERBS)} {rng.choice(WHEN)}."


def long_lookup(rng, pkg, difficulty):
    n_parts = difficulty + 1  # 2..4 files
    n_lines = 10 + 4 * difficulty  # ~45 bytes a line: 0.6-1 KB (= tokens, byte tokenizer) a file
    files = base_repo(rng, pkg, difficulty)
    codes, facts, parts = [], {}, []
    for i in range(1, n_parts + 1):
        path = f"docs/part_{i}.md"
        code, name = rng.randint(1000, 9999), rng.choice(CODE_NAMES)
        lines = [_filler_line(rng) for _ in range(n_lines)]
        lines.insert(rng.randint(1, n_lines - 1), f"The {name} code is {code}.")
        files[path] = f"# Notes, part {i}\n\n" + "\n".join(lines) + "\n"
        codes.append(str(code))
        facts[path] = f"{path} gives code {code}"
        parts.append(path)
    files[f"{pkg}/access.py"] = (
        'ACCESS = ""  # the codes of docs/part_*.md, in order, joined by "-"\n'
    )
    answer = "-".join(codes)
    hidden = {
        "test_access_hidden.py": (
            f"from {pkg}.access import ACCESS\n\n\n"
            f"def test_access_code():\n    assert ACCESS == {answer!r}\n\n\n"
            f"def test_one_code_per_part():\n    assert len(ACCESS.split('-')) == {n_parts}\n"
        )
    }
    solution = {f"{pkg}/access.py": f"ACCESS = {answer!r}\n"}
    prompt = pick_prompt(
        difficulty,
        (
            f"set ACCESS in {pkg}/access.py: the code from each of docs/part_1.md .. "
            f"docs/part_{n_parts}.md, in order, joined by '-'",
            f"ACCESS in {pkg}/access.py must be the docs parts' codes joined by '-'",
            "fill in ACCESS from the codes in the docs",
        ),
    )
    meta = {"read_first": parts, "facts": facts}
    return files, prompt, hidden, solution, meta

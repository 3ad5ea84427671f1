"""Search tools: `search` (regex over the repository) and `code_search` (BM25-ranked code chunks).

Both run INSIDE the sandbox, as a trusted stdlib-only script (`python3 -I -S -c SCRIPT`, the
arguments as JSON on stdin): the pattern is the policy's, and a catastrophic regex must cost the
episode's CPU and wall budget, not the host's; the repository's files are never parsed on the host.
Output is capped (MAX_HITS lines of at most LINE_CHARS characters, files over FILE_BYTES skipped)
and paths are relative to the repository, so an observation is a function of the repo and the call.

code_search splits Python files into chunks at top-level definitions (other text files into
CHUNK_LINES-line windows), tokenizes identifiers into lowercase subwords (snake_case and CamelCase
split), and ranks chunks by Okapi BM25 (k1=1.5, b=0.75). Why not a BM25 library from PyPI: the
script must run in the sandbox under `-I -S` with the stdlib only (bm25s imports jax and scipy when
they are installed: 2.4 s per call here, under the per-process address-space cap), and the scorer
is a dozen lines.
"""

from __future__ import annotations

import json

MAX_HITS = 50
LINE_CHARS = 200
FILE_BYTES = 1 << 20
CHUNK_LINES = 40
DEFAULT_K = 5
MAX_K = 20

SCHEMAS = {
    "search": {
        "pattern": ((str,), True),
        "path": ((str,), False),
        "max_results": ((int,), False),
    },
    "code_search": {"query": ((str,), True), "k": ((int,), False)},
}
HELP = {
    "search": "- search {pattern, path?, max_results?}: regex over the repo's files; "
    "path:line: text",
    "code_search": "- code_search {query, k?}: the k code chunks most relevant to a query (BM25)",
}

SCRIPT = r"""
import json, math, os, re, sys
a = json.loads(sys.stdin.read())
SKIP = {".git", "__pycache__", ".pytest_cache", ".tox", "node_modules"}
def files(top):
    for d, dirs, names in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x not in SKIP)
        for n in sorted(names):
            p = os.path.join(d, n)
            if os.path.islink(p) or not os.path.isfile(p) or os.path.getsize(p) > a["file_bytes"]:
                continue
            try:
                with open(p, encoding="utf-8") as f:
                    yield os.path.relpath(p, "."), f.read()
            except (UnicodeDecodeError, OSError):
                continue
def cut(s):
    s = s.rstrip("\n")
    return s if len(s) <= a["line_chars"] else s[: a["line_chars"]] + "..."
if a["tool"] == "search":
    try:
        rx = re.compile(a["pattern"])
    except (re.error, RecursionError, OverflowError) as e:
        print(f"error: bad regex: {e}"); sys.exit(0)
    top = os.path.normpath(a["path"])
    if top.startswith("..") or os.path.isabs(top):
        print("error: path is outside the repository"); sys.exit(0)
    hits = 0
    for rel, text in files(top):
        for i, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                hits += 1
                if hits <= a["max_results"]:
                    print(f"{rel}:{i}: {cut(line)}")
    if hits > a["max_results"]:
        print(f"[{hits - a['max_results']} more matches not shown]")
    elif not hits:
        print("(no matches)")
    sys.exit(0)
def words(s):
    out = []
    for w in re.findall(r"[A-Za-z][A-Za-z0-9]*|[0-9]+", s):
        out += [p.lower() for p in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", w)] or [w.lower()]
    return out
chunks = []
for rel, text in files("."):
    lines = text.splitlines()
    if rel.endswith(".py"):
        starts = [i for i, l in enumerate(lines) if re.match(r"(def|class|async def)\s|@", l)]
        starts = [s for j, s in enumerate(starts) if j == 0 or not lines[starts[j - 1]].startswith("@") or s != starts[j - 1] + 1]
        starts = sorted({0, *starts})
    else:
        starts = list(range(0, max(len(lines), 1), a["chunk_lines"]))
    for s, e in zip(starts, starts[1:] + [len(lines)]):
        body = "\n".join(lines[s:e])
        if body.strip():
            chunks.append((rel, s + 1, e, words(rel + " " + body), lines[s] if s < len(lines) else ""))
q = words(a["query"])
if not chunks or not q:
    print("(no matches)"); sys.exit(0)
n, avg = len(chunks), sum(len(c[3]) for c in chunks) / len(chunks)
df = {}
for c in chunks:
    for w in set(c[3]):
        df[w] = df.get(w, 0) + 1
def score(c):
    tf, s = {}, 0.0
    for w in c[3]:
        tf[w] = tf.get(w, 0) + 1
    for w in set(q):
        if w in tf:
            idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
            s += idf * tf[w] * 2.5 / (tf[w] + 1.5 * (0.25 + 0.75 * len(c[3]) / avg))
    return s
ranked = sorted(((score(c), i) for i, c in enumerate(chunks)), key=lambda t: (-t[0], t[1]))
shown = [(s, chunks[i]) for s, i in ranked[: a["k"]] if s > 0]
for s, (rel, lo, hi, _, first) in shown:
    print(f"{rel}:{lo}-{hi} ({s:.2f}): {cut(first.strip())}")
if not shown:
    print("(no matches)")
"""  # noqa: E501


def command() -> str:
    """The shell command that runs the script (arguments come on stdin)."""
    return "exec python3 -I -S -c " + "'" + SCRIPT.replace("'", "'\\''") + "'"


def arguments(name: str, args: dict) -> bytes:
    """stdin for the script: the call's arguments with the caps filled in."""
    out = {"tool": name, "line_chars": LINE_CHARS, "file_bytes": FILE_BYTES}
    if name == "search":
        out.update(pattern=args["pattern"], path=args.get("path", "."))
        out["max_results"] = min(max(int(args.get("max_results", MAX_HITS)), 1), MAX_HITS)
    else:
        out.update(query=args["query"], chunk_lines=CHUNK_LINES)
        out["k"] = min(max(int(args.get("k", DEFAULT_K)), 1), MAX_K)
    return json.dumps(out).encode()

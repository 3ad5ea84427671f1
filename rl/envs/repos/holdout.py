"""Held out by repository, and a contamination check against the training data.

Two splits keep evaluation honest. By site: the committed suite's recipe ids are never mined into a
training pool (projects.pool skips them). By repository: every project in HELD_OUT_REPOS is held
out whole; training pools never mine it, and its source must not appear in anything the model is
trained on:

    python -m rl.envs.repos.holdout                 # split + check the default
                                                      corpora, exit 1 on a hit
    python -m rl.envs.repos.holdout --held-out roman,parse --traces 'data/traces/*.jsonl'

The check (`contamination`): every held-out project's .py files (its modules and its tests) are cut
into shingles of NGRAM consecutive normalized lines (whitespace collapsed, blank and short lines
dropped, so re-indentation, reflowed blank lines and JSON escaping inside a trace do not hide a
copy). A file counts as present in a document when at least THRESHOLD of its shingles occur in that
document. Documents are the pretraining corpus (the sources the pretrain and default configs name;
by default the interpreter's stdlib .py files) and the SFT traces (data/traces/*.jsonl, every
string of every record, JSON-encoded strings inside them decoded too). Corpus documents the
pretraining pipeline cannot decode (not UTF-8) are skipped, as the pipeline skips them.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import hashlib
import json
import sys
from collections.abc import Iterable, Iterator

from rl.envs.repos.vendored import PROJECTS, ROOT, project_files

# Held out whole: never in a training pool, checked for contamination. roman since the suite;
# jsonpointer (unittest, tests.py) and schema (pytest functions) since the scale pool (issue 50).
HELD_OUT_REPOS = ("roman", "jsonpointer", "schema")
NGRAM = 4  # consecutive normalized lines per shingle
MIN_LINE = 12  # normalized characters: shorter lines ("else:", "return x") are everywhere
MIN_SHINGLES = 4  # a file with fewer shingles is too small to tell a copy from coincidence
THRESHOLD = 0.25  # share of a file's shingles found in one document that counts as a copy
TRACES = str(ROOT / "data/traces/*.jsonl")


def split_projects(projects: Iterable[str], held_out=HELD_OUT_REPOS) -> tuple[list, list]:
    """(train, held-out) project names."""
    projects = list(projects)
    unknown = set(held_out) - set(projects)
    if unknown:
        raise ValueError(f"held-out projects {sorted(unknown)} are not among {projects}")
    return [p for p in projects if p not in held_out], [p for p in projects if p in held_out]


def split_recipes(recipes, held_out_repos=HELD_OUT_REPOS, held_out_ids=frozenset()):
    """(train, held-out) recipes: held out when its repository is held out (by repository) or
    its id is in `held_out_ids`, e.g. the committed suite's (by site)."""
    held = [r for r in recipes if r.project in held_out_repos or r.id in held_out_ids]
    keep = {id(r) for r in held}
    return [r for r in recipes if id(r) not in keep], held


# ---------------------------------------------------------------- contamination


def normalize(line: str) -> str:
    return " ".join(line.split())


def shingles(text: str) -> set[str]:
    """Hashes of every NGRAM consecutive normalized lines of at least MIN_LINE characters."""
    lines = [n for n in (normalize(x) for x in text.splitlines()) if len(n) >= MIN_LINE]
    out = set()
    for i in range(len(lines) - NGRAM + 1):
        out.add(
            hashlib.blake2b("\n".join(lines[i : i + NGRAM]).encode(), digest_size=8).hexdigest()
        )
    return out


@dataclasses.dataclass(frozen=True)
class Hit:
    held_out_file: str  # "project/path"
    document: str  # where it was found ("path", "path:line 7")
    fraction: float  # share of the file's shingles found there

    def __str__(self) -> str:
        return f"{self.held_out_file} in {self.document} ({self.fraction:.0%} of its shingles)"


def held_out_index(projects=HELD_OUT_REPOS) -> dict[str, set[str]]:
    """'project/path' -> shingles, for every .py file of the held-out projects big enough to
    tell."""
    out = {}
    for name in projects:
        for path, text in project_files(name).items():
            if path.endswith(".py") and len(s := shingles(text)) >= MIN_SHINGLES:
                out[f"{name}/{path}"] = s
    if not out:
        raise ValueError(f"held-out projects {list(projects)} have no .py files to check")
    return out


def contamination(index: dict[str, set[str]], documents: Iterable[tuple[str, str]]) -> list[Hit]:
    """Every (held-out file, document) pair where the document holds >= THRESHOLD of the file's
    shingles."""
    owners: dict[str, list[str]] = {}
    for name, sh in index.items():
        for h in sh:
            owners.setdefault(h, []).append(name)
    hits = []
    for where, text in documents:
        counts: dict[str, int] = {}
        for h in shingles(text) & owners.keys():
            for name in owners[h]:
                counts[name] = counts.get(name, 0) + 1
        for name, n in sorted(counts.items()):
            if n / len(index[name]) >= THRESHOLD:
                hits.append(Hit(name, where, n / len(index[name])))
    return hits


def _strings(value) -> Iterator[str]:
    """Every string in a JSON value; strings that are JSON themselves (tool-call arguments) are
    decoded and searched too, so escaped newlines still split lines."""
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            try:
                yield from _strings(json.loads(value))
                return
            except ValueError:
                pass
        # JSON embedded mid-string (a tool call after prose): undo the escapes, level by level
        for _ in range(3):
            if "\\n" not in value:
                break
            value = value.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"')
            yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def trace_documents(pattern: str = TRACES) -> Iterator[tuple[str, str]]:
    """(where, text) per record of the SFT trace files matching `pattern`."""
    paths = sorted(glob.glob(pattern))
    if not paths:
        raise FileNotFoundError(f"no trace files match {pattern!r}")
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    yield f"{path}:line {i}", "\n".join(_strings(json.loads(line)))


def corpus_documents(sources: Iterable[dict]) -> Iterator[tuple[str, str]]:
    """(where, text) of every document of the pretraining sources (data/sources.py specs)."""
    from data.sources import SourceSpec, open_source
    from model.errors import DataError

    for spec in sources:
        source = open_source(SourceSpec(**dict(spec)))
        for i in range(len(source)):
            try:
                doc = source.read(i)
            except DataError:  # not UTF-8 (the stdlib's encoding tests): the pipeline skips it too
                continue
            text = doc.value if isinstance(doc.value, str) else "\n".join(_strings(doc.value))
            yield doc.where, text


def pretraining_sources(config_modules=("default", "pretrain")) -> list[dict]:
    """The data sources the named configs (configs/<name>.py) train on, deduplicated."""
    import importlib

    out = []
    for name in config_modules:
        for spec in importlib.import_module(f"configs.{name}").get_config().data.sources:
            spec = dict(spec)
            if spec not in out:
                out.append(spec)
    return out


def check(held_out=HELD_OUT_REPOS, traces: str = TRACES, sources=None, log=print) -> list[Hit]:
    """Hits of any held-out project's source in the pretraining corpus or the SFT traces."""
    index = held_out_index(held_out)
    sources = pretraining_sources() if sources is None else sources
    log(f"{len(index)} held-out files of {list(held_out)}; corpus {sources}; traces {traces}")
    docs = [corpus_documents(sources), trace_documents(traces)]
    hits = [h for d in docs for h in contamination(index, d)]
    for h in hits:
        log(f"CONTAMINATED: {h}")
    return hits


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.envs.repos.holdout")
    parser.add_argument("--held-out", default=",".join(HELD_OUT_REPOS))
    parser.add_argument("--traces", default=TRACES)
    args = parser.parse_args(argv)
    train, held = split_projects(PROJECTS, tuple(args.held_out.split(",")))
    print(f"train projects {train}; held out by repository {held}")
    hits = check(tuple(held), args.traces)
    print(f"{len(hits)} contaminated (file, document) pairs; threshold {THRESHOLD:.0%} of shingles")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())

"""A code BPE vocabulary (data/code_bpe.py) learned from the training repositories only: their
vendored Python files and the real-repository expert traces (rl/envs/repo_traces.py writes those
from training repositories only; holdout.check finds no held-out file in them). A held-out
repository (holdout.HELD_OUT_REPOS) never contributes, so its names stay as unseen by the
vocabulary as by the policy.

    python -m rl.envs.repos.vocabulary --vocab_size 4096 --out /tmp/code_bpe_4096.json
    python -m rl.envs.repos.vocabulary --pattern identifiers --out /tmp/code_bpe_4096_ids.json
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from data.code_bpe import PATTERNS, corpus, train_bpe
from rl.envs.repos.holdout import HELD_OUT_REPOS
from rl.envs.repos.vendored import ROOT, VENDOR

EXPERT_TRACES = str(ROOT / "data/traces/repo_expert_traces.jsonl")


def training_files(vendor=VENDOR, held_out: Sequence[str] = HELD_OUT_REPOS) -> list[str]:
    """The .py files of the vendored repositories not held out, sorted."""
    return sorted(
        str(p) for p in vendor.glob("*/**/*.py") if p.relative_to(vendor).parts[0] not in held_out
    )


def write_vocabulary(
    vocab_size: int, out: str, traces: str = EXPERT_TRACES, pattern: str = "cl100k"
) -> str:
    """The training repositories' vocabulary of `vocab_size` ids, written to `out`; `pattern`:
    data/code_bpe.py's pre-tokenizer ("identifiers": a name is the same ids wherever it is)."""
    return train_bpe(corpus(training_files(), traces), vocab_size, out, pattern)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab_size", type=int, default=4096)
    p.add_argument("--out", required=True, help="the tokenizer.json to write")
    p.add_argument(
        "--pattern",
        default="cl100k",
        choices=tuple(PATTERNS),
        help="the pre-tokenizer (data/code_bpe.py): identifiers cuts a name from what precedes it",
    )
    a = p.parse_args(argv)
    try:
        path = write_vocabulary(a.vocab_size, a.out, pattern=a.pattern)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    print(f"{path}: {a.vocab_size} ids from {len(training_files())} training files and the traces")


if __name__ == "__main__":
    main()

"""Where the expert's first search names the statement's symbol, does a policy start that name, and
if not, how far off is it and what does it write instead? (issue 52)

    python bench/probe_name_first.py PARAMS [PARAMS ...] [--traces F] [--n 64] [--words]
    python bench/probe_name_first.py --tiny      # smoke: a random-init tiny export, 4 traces

eval/name_copy.py's probe rows (bench/rl_stages.py name_probe_rows: n committed expert traces cut
after the first assistant turn that names a symbol the statement backticks), in the tokenizer each
export records: the names as trained, renamed afresh to syllables (`fresh`), and with --words
renamed to the training repositories' identifier words (`word`: names no trace holds, made of the
code's own words, as a real held-out statement's are). Per export and set, at the name's first
token (eval/name_copy.py first_token_odds): the share the argmax writes, the true token's median
rank among the vocabulary and mean probability, and the tokens the argmax writes most often where
it misses. A rank in the thousands of a 4,096-id vocabulary is a token the policy has learnt not
to write there, not a pointer that fell short.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import numpy as np  # noqa: E402

from bench import rl_stages  # noqa: E402
from bench.common import parse_tiny, tiny_export  # noqa: E402

TRACES = os.path.join(ROOT, "data/traces/repo_expert_traces.jsonl")


def shown(tok, token: int) -> str:
    """`token`'s text (repr) in backticks; a model's padding id past the tokenizer's: `id N`."""
    try:
        return f"`{tok.decode([token])!r}`"
    except ValueError:
        return f"`id {token}`"


def odds_rows(params_dir: str, traces: str, n: int, words: bool) -> list[tuple]:
    """[(set, rows, argmax share, median rank, mean probability, 'tok' x count ...)] per name set
    of name_probe_rows for the export in `params_dir`."""
    from data.export_tokenizer import tokenizer_for_export
    from eval.name_copy import first_token_odds
    from model.export import load_params

    cfg, params = load_params(params_dir)
    tok = tokenizer_for_export(params_dir, "", cfg.vocab_size)
    pool = None
    if words:
        from data.rename import word_pool
        from rl.envs.repos.vocabulary import training_files

        pool = word_pool(training_files())
    seq_len = rl_stages.probe_len(cfg)
    out = []
    for kind, rows in rl_stages.name_probe_rows(traces, n, seq_len, tok, pool).items():
        odds = first_token_odds(cfg, params, rows, seq_len)
        ranks = np.asarray(odds["ranks"])
        missed = [w for w, r in zip(odds["written"], ranks) if r]
        common = collections.Counter(missed).most_common(3)
        instead = ", ".join(f"{shown(tok, w)} x{c}" for w, c in common) or "-"
        hit, rank, prob = (ranks == 0).mean(), np.median(ranks), np.mean(odds["probs"])
        out.append((kind, len(rows), hit, rank, prob, instead))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("params_dirs", nargs="*", help="exported params (model.export layout)")
    ap.add_argument("--traces", default=TRACES, help="expert traces (JSONL, chat messages)")
    ap.add_argument(
        "--n", type=int, default=64, help="traces sampled (those naming a symbol count)"
    )
    ap.add_argument("--words", action="store_true", help="also names of identifier words")
    args = parse_tiny(ap, dict(n=4), argv)
    if not args.params_dirs:
        if not args.tiny:
            ap.error("give at least one PARAMS_DIR (an export, model.export layout) unless --tiny")
        args.params_dirs = [tiny_export("tiny", max_position_embeddings=2048)]  # bytes: ~1.5k
    print("| params | names | rows | first token written | median rank | mean probability |"
          " written instead (most often) |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---|")
    for d in args.params_dirs:
        for kind, rows, hit, rank, prob, instead in odds_rows(d, args.traces, args.n, args.words):
            print(f"| {d} | {kind} | {rows} | {hit:.2f} | {rank:.0f} | {prob:.3f} | {instead} |")


if __name__ == "__main__":
    main()

"""Can the policy learn to copy? (issue 52: the measured blocker is writing the statement's symbol
into a call.) Trains the params with train/'s step and Adam on a synthetic copy task and reports,
every --every steps, the NLL on the bytes only copying predicts, beside its two bounds, then the
name-copy probe (eval/name_copy.py) on committed expert traces as trained and renamed afresh.

    python bench/bench_copy.py --init PARAMS [--task induction] [--steps 600] [--lr 1e-3]
    python bench/bench_copy.py --preset tiny4 --task fixed      # from a random init
    python bench/bench_copy.py --tiny                           # smoke: tiny, 2 steps
    python bench/bench_copy.py --preset tiny4 --steps 3000 --export DIR   # a copier to SFT from
    python bench/bench_copy.py --write_drills PATH [--drills N]  # the induction rows as SFT docs
    python bench/bench_copy.py --task words --tokenizer hf:V.json --preset tiny  # in V's tokens
    python bench/bench_copy.py --task mention --tokenizer hf:V.json --preset tiny  # + a pointer
    python bench/bench_copy.py --init C --task mention --steps 0 --held 512  # C on 512 rows

Tasks (rows of 2 x --half tokens, --batch a step; the letter tasks' are random lowercase bytes):
- fixed: --half random bytes, then the same again: the second half is a copy at a fixed
  distance (a head attending --half positions back solves it; no content lookup).
- induction: 4 random names (5-11 bytes) at random places in random filler, then the same names
  in a shuffled order, then padding: a name's bytes after its first are known only by finding
  the earlier occurrence of the byte before them (content-addressed copy, an induction head).
- words: the induction task made of the training repositories' identifier words, in any
  tokenizer's ids (--tokenizer; bench/copy_words.py: letter names merge with the filler under a
  BPE vocabulary, so only these rows ask a BPE model for the copy the names need).
- mention: a words row whose context marks one of its names in backticks and which ends in the
  expert's "Searching for the definition of" and that name: its first token is known only
  through the mark (a pointer, what a first search needs), the rest by a copy.
Scored positions: the second half's bytes (fixed) or the second list's name tokens after each
name's first (induction, words), plus the asked-for name's every token (mention). Perfect copying
scores 0 nats; not copying, log 26 = 3.26 on the letter tasks; copying by a key of the last 1 or 2
tokens (keyed_copy_nll, keyed_copy_hits: the table's header) in between. The table's greedy column:
the share of scored tokens that are the model's argmax; for words, beside it the same share on
control rows whose repeated names are other draws, absent from the context (what the words' own
statistics give without a copy); for mention, the share of asked-for first tokens the model writes
on its rows and on control rows with no mark (where a model that copies but reads no mark guesses
among the row's 4 names).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from bench import rl_stages  # noqa: E402
from bench.common import parse_tiny  # noqa: E402
from bench.copy_words import POINTED, word_document, word_row  # noqa: E402

LETTERS = (97, 123)  # a-z
SPACE = 32
NO_COPY = math.log(LETTERS[1] - LETTERS[0])


def fixed_row(rng, half: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens [2*half], scored [2*half]: 1 where the target is a copy)."""
    x = rng.integers(*LETTERS, size=half)
    return np.concatenate([x, x]), np.r_[np.zeros(half), np.ones(half)]


def induction_parts(rng, half: int) -> tuple[list, list]:
    """(context: 4 random names at random places in `half` bytes of random filler, names: the
    same 4 in a shuffled order), as lists of byte ids per name."""
    names = [rng.integers(*LETTERS, size=rng.integers(5, 12)) for _ in range(4)]
    filler = list(rng.integers(*LETTERS, size=half - sum(len(x) + 1 for x in names)))
    cuts = np.sort(rng.integers(0, len(filler) + 1, size=len(names)))  # names whole, in order
    context = []
    for x, lo, hi in zip(names, np.r_[0, cuts[:-1]], cuts):
        context += filler[lo:hi] + [SPACE, *x]
    context += filler[cuts[-1] :]
    return context, [list(names[j]) for j in rng.permutation(len(names))]


def induction_row(rng, half: int) -> tuple[np.ndarray, np.ndarray]:
    """The module docstring's induction row: (tokens [2*half], scored [2*half])."""
    tokens, names = induction_parts(rng, half)
    scored = [0] * len(tokens)
    for name in names:
        tokens += [SPACE, *name]
        scored += [0, 0] + [1] * (len(name) - 1)  # the first byte of a name is a guess
    pad = 2 * half - len(tokens)
    return np.asarray(tokens + [SPACE] * pad), np.asarray(scored + [0] * pad)


def drill_document(rng, half: int) -> dict:
    """An induction row as an SFT chat document (the trace files' format): the user's message is
    the context, the assistant's the names in their new order, space-separated; SFT's loss (the
    assistant's bytes) then scores the copy, plus each name's first byte, which is a guess."""
    context, names = induction_parts(rng, half)
    text = lambda ids: bytes(int(b) for b in ids).decode()  # noqa: E731 (lowercase ascii)
    return {
        "messages": [
            {"role": "user", "content": text(context)},
            {"role": "assistant", "content": " ".join(text(x) for x in names)},
        ]
    }


def write_drills(
    path: str, n: int, half: int, seed: int, pool=(), words: int = 24, ask: bool = False
) -> str:
    """`n` drill documents to `path` (jsonl, field "messages") from an rng stream apart from the
    copy task's training and held-out rows of the same `seed`: induction rows of `half`, or with
    a `pool`, words rows of `words` filler words (copy_words.py; `ask`: mention rows)."""
    rng = np.random.default_rng([seed, 1])
    document = (
        (lambda: word_document(rng, pool, words, ask))
        if pool
        else lambda: drill_document(rng, half)
    )
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(json.dumps(document()) + "\n")
    os.replace(path + ".tmp", path)  # whole or absent: a killed run leaves no half file
    return path


def row_maker(task: str, half: int, tok=None, pool=(), words: int = 24, control: bool = False):
    """rng -> one row of `task`: (tokens [2*half], scored [2*half]); words and mention rows in
    `tok`'s ids, `words` filler words drawn from `pool` (copy_words.py; control: their control
    rows, names absent from the context / no mark)."""
    if task == "fixed":
        return lambda rng: fixed_row(rng, half)
    if task == "induction":
        return lambda rng: induction_row(rng, half)
    if task == "mention":
        ask = "unmarked" if control else "marked"
        return lambda rng: word_row(tok, rng, pool, words, 2 * half, ask=ask)
    return lambda rng: word_row(tok, rng, pool, words, 2 * half, absent=control)


def batch(make_row, rng, size: int) -> tuple[np.ndarray, np.ndarray]:
    rows = [make_row(rng) for _ in range(size)]
    return np.stack([r[0] for r in rows]).astype(np.int32), np.stack([r[1] for r in rows])


def continuations(ids: list, p: int, key_len: int) -> list:
    """The bytes that followed each earlier occurrence (before p) of the `key_len` bytes before
    p, in order."""
    key = ids[p - key_len : p]
    return [ids[j + key_len] for j in range(p - key_len) if ids[j : j + key_len] == key]


def keyed_copy_nll(tokens: np.ndarray, scored: np.ndarray, key_len: int) -> float:
    """The mean NLL over the scored bytes of a predictor that copies by content with a key of
    `key_len` bytes: the bytes that followed each earlier occurrence of the last `key_len` bytes,
    weighted by count (uniform over the letters where the key never occurred). The mechanism's
    yardstick: an induction head keyed on one byte scores ~1.2 on the induction rows (a byte
    recurs in the filler), one keyed on two ~0.06."""
    nll = []
    for row, mask in zip(tokens.tolist(), scored):
        for t in np.flatnonzero(mask):
            seen = continuations(row, t, key_len)
            hit = seen.count(row[t])
            nll.append(math.log(len(seen) / hit) if hit else NO_COPY if not seen else math.inf)
    return float(np.mean(nll))


def keyed_copy_hits(ids: list, positions, key_len: int) -> list[bool]:
    """Per position p: does the byte that most often followed the earlier occurrences of the
    `key_len` bytes before p (a tie: the latest) equal ids[p]? A key never seen earlier is a
    miss. What a greedy induction head keyed on that many bytes writes."""
    hits = []
    for p in positions:
        seen = continuations(ids, p, key_len)
        best = collections.Counter(reversed(seen)).most_common(1)  # stable: ties to the latest
        hits.append(bool(best) and best[0][0] == ids[p])
    return hits


def keyed_probe(rows: dict, key_lens=(1, 2, 3), unit: str = "byte") -> str:
    """The name-copy probe's yardstick: the share of name bytes after the first (the first has no
    key in common with the statement's occurrence, which follows a backtick) that a copier keyed
    on k bytes writes, per row set. Rows of another tokenizer: its tokens (`unit` names them)."""
    out = []
    for label, these in rows.items():
        shares = []
        for k in key_lens:
            hits = [
                h for ids, lo, n in these for h in keyed_copy_hits(ids, range(lo + 1, lo + n), k)
            ]
            shares.append(f"{k}-{unit} {np.mean(hits):.2f}")
        out.append(f"{label}: " + ", ".join(shares))
    return "; ".join(out)


def statement_ids(tok, rows: dict) -> str:
    """eval/name_copy.py same_ids_as_statement per row set: can a copy of ids write the name?"""
    from eval.name_copy import same_ids_as_statement

    out = []
    for label, these in rows.items():
        got = same_ids_as_statement(tok, these)
        out.append(f"{label}: first token {got['first']:.2f}, all tokens {got['whole']:.2f}")
    return "; ".join(out)


def lm_batch(tokens: np.ndarray, scored: np.ndarray) -> dict:
    """Rows [B,T] and their scored mask (nonzero: scored) -> train/'s batch: predict
    tokens[:, 1:], loss on the scored targets only (train.losses.lm_loss averages CE over
    loss_mask)."""
    b, t = tokens.shape[0], tokens.shape[1] - 1
    return {
        "tokens": tokens[:, :-1],
        "targets": tokens[:, 1:],
        "positions": np.broadcast_to(np.arange(t, dtype=np.int32), (b, t)),
        "segment_ids": np.ones((b, t), np.int32),
        "loss_mask": (scored[:, 1:] > 0).astype(np.float32),
    }


def make_step(cfg):
    """The project's train_step with its LM loss (no MTP, no balance loss, no router-bias update:
    the copy CE alone moves the params), and a held-out score: (the scored targets' mean NLL from
    its eval_step, the share of them that are the model's argmax)."""
    from eval.name_copy import greedy_fn
    from train.losses import make_lm_loss
    from train.step import eval_step, train_step

    loss_fn = make_lm_loss(cfg, mtp_mode="none", use_balance_loss=False)
    step = jax.jit(lambda state, b: train_step(state, b, loss_fn)[0])
    sums = jax.jit(lambda params, b: eval_step(params, b, loss_fn))
    greedy = greedy_fn(cfg)

    def score(params, b) -> tuple[float, float]:
        out = sums(params, b)
        hit = np.asarray(greedy(params, b["tokens"])) == b["targets"]
        return float(out["ce_sum"] / out["weight"]), float(hit[b["loss_mask"] > 0].mean())

    return step, score


def probe(cfg, params, rows: dict) -> str:
    from eval.name_copy import name_copy_probe

    if not all(rows.values()):
        return f"none: no naming prefix fits the model's {rl_stages.probe_len(cfg)}-token context"
    out = []
    for label, these in rows.items():
        got = name_copy_probe(cfg, params, these, rl_stages.probe_len(cfg))
        out.append(
            f"{label}: exact {got['names_exact']:.3f} bytes {got['name_bytes']:.3f} "
            f"first {got['name_first']:.3f}"
        )
    return "; ".join(out) + f" ({len(next(iter(rows.values())))} traces)"


def parse_override(text: str) -> tuple[str, int | float]:
    """'num_hidden_layers=2' -> ('num_hidden_layers', 2); 'initializer_range=0.02' -> a float."""
    field, _, value = text.partition("=")
    for kind in (int, float):
        try:
            return field, kind(value)
        except ValueError:
            pass
    sys.exit(f"error: --override {text!r}: want FIELD=NUMBER, e.g. initializer_range=0.02")


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", default="", help="exported params (train/'s export)")
    ap.add_argument("--preset", default="tiny4", help="random init of a preset without --init")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a ModelConfig field of the random init, e.g. initializer_range=0.02 (repeatable)",
    )
    ap.add_argument(
        "--task", default="induction", choices=("fixed", "induction", "words", "mention")
    )
    ap.add_argument(
        "--tokenizer",
        default="",
        help="data/tokenizers.py spec (hf:PATH); '': --init's recorded one, else bytes",
    )
    ap.add_argument("--words", type=int, default=24, help="filler words a words row")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--half", type=int, default=64)
    ap.add_argument(
        "--held",
        type=int,
        default=0,
        help="rows in the held-out and control batches (0: --batch); e.g. --init C --steps 0 "
        "--held 512 scores a trained copier on more rows than its table had",
    )
    ap.add_argument("--probe_traces", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--export", default="", help="save the trained params here (model.export)")
    ap.add_argument(
        "--write_drills",
        default="",
        help="write --drills rows of --task (induction, or words / mention: its --words) as SFT "
        "chat documents to this jsonl and exit",
    )
    ap.add_argument("--drills", type=int, default=20_000)
    tiny = dict(preset="tiny", steps=2, every=1, batch=2, half=48, probe_traces=4)
    return parse_tiny(ap, tiny)


def model_for(args) -> tuple:
    """(cfg, params, tokenizer spec): --init's export, read in --tokenizer or else the one it
    records (data/export_tokenizer.py), or a random init of --preset at the probe's length (the
    presets' own context is 512), its vocabulary sized to a --tokenizer that is not bytes."""
    from data.export_tokenizer import recorded_tokenizer, tokenizer_for_export
    from data.tokenizers import load_tokenizer
    from model import init_params, presets
    from model.export import load_params

    try:
        if args.init:
            cfg, params = load_params(args.init)
            tokenizer_for_export(args.init, args.tokenizer, cfg.vocab_size)  # or one line
            return cfg, params, args.tokenizer or recorded_tokenizer(args.init) or "byte"
        tok = load_tokenizer(args.tokenizer or "byte")
    except (OSError, ValueError) as e:
        sys.exit(f"error: --init {args.init!r} / --tokenizer {args.tokenizer!r}: {e}")
    overrides = dict(num_mtp_modules=0, max_position_embeddings=2048)
    if args.tokenizer not in ("", "byte"):
        overrides["vocab_size"] = tok.vocab_size
    overrides.update(parse_override(x) for x in args.override)
    try:
        cfg = presets.get(args.preset, **overrides)
    except (TypeError, ValueError) as e:  # an unknown field or a value the config refuses
        sys.exit(f"error: --preset {args.preset} --override {args.override}: {e}")
    return cfg, init_params(cfg, jax.random.PRNGKey(args.seed)), args.tokenizer or "byte"


def table_header(task: str, tokens: np.ndarray, scored: np.ndarray) -> str:
    """The table's header with the held-out batch's yardsticks: what a copier keyed on the last
    2 or 1 tokens writes (and its NLL on the letter tasks, whose no-copy bound is log 26)."""
    hits = [
        np.mean([h for row, m in zip(tokens.tolist(), scored) for h in keyed_copy_hits(
            row, np.flatnonzero(m), k)])
        for k in (2, 1)
    ]  # fmt: skip
    keyed = f"a copier keyed on 2 / 1 tokens writes {hits[0]:.2f} / {hits[1]:.2f}"
    if task not in ("words", "mention"):
        nll = ", ".join(f"{k}-byte key {keyed_copy_nll(tokens, scored, k):.2f}" for k in (2, 1))
        keyed += f"; NLL: copy 0, {nll}, no copy {NO_COPY:.2f}"
    control = "greedy share, names not in the context (words: what is not copying)"
    if task == "mention":
        control = "the asked-for name's first token written: marked rows / no mark (a guess)"
    nll = "copied-token NLL (held-out batch)"
    return f"| step | {nll} | greedy share ({keyed}) | {control} | wall s |"


def control_column(args, score, tok, pool: tuple, rows_held: tuple):
    """params -> the table's control cell. words: the greedy share on rows whose names after the
    context are other draws (what the words' own statistics give: the share minus it is the
    copy). mention: the asked-for first tokens written on the held-out rows and on rows with no
    mark (what copying without reading the mark gives). Other tasks: '-'."""
    if args.task not in ("words", "mention"):
        return lambda params: "-"
    rows = batch(
        row_maker(args.task, args.half, tok, pool, args.words, control=True),
        np.random.default_rng(args.seed + 2),
        args.held or args.batch,
    )
    if args.task == "words":
        absent = lm_batch(*rows)
        return lambda params: f"{score(params, absent)[1]:.3f}"
    marked, unmarked = (lm_batch(tokens, scored == POINTED) for tokens, scored in (rows_held, rows))
    return lambda params: f"{score(params, marked)[1]:.3f} / {score(params, unmarked)[1]:.3f}"


def main():
    from data.tokenizers import ByteTokenizer, load_tokenizer
    from train.state import create_train_state

    args = arguments()
    if args.task == "induction" and args.half < 48:
        sys.exit(f"error: --half {args.half}: the induction task needs 48 (4 names of <= 12 bytes)")
    pool = ()
    if args.task in ("words", "mention"):
        from data.rename import word_pool
        from rl.envs.repos.vocabulary import training_files

        pool = word_pool(training_files())
    if args.write_drills:
        ask = args.task == "mention"
        path = write_drills(
            args.write_drills, args.drills, args.half, args.seed, pool, args.words, ask
        )
        print(path)
        return
    cfg, params, spec = model_for(args)
    tok = load_tokenizer(spec)
    traces = os.path.join(ROOT, "data/traces/repo_expert_traces.jsonl")
    rows = rl_stages.name_probe_rows(traces, args.probe_traces, rl_stages.probe_len(cfg), tok)
    unit = "byte" if isinstance(tok, ByteTokenizer) else "token"
    print(f"name {unit}s after the first that a copier keyed on the {unit}s before writes: "
          f"{keyed_probe(rows, unit=unit)}")  # fmt: skip
    print(f"names written in the statement's ids: {statement_ids(tok, rows)}")
    print(f"name-copy probe before: {probe(cfg, params, rows)}", flush=True)
    state = create_train_state(params, optax.adam(args.lr), jax.random.PRNGKey(args.seed))
    step, score = make_step(cfg)
    make_row = row_maker(args.task, args.half, tok, pool, args.words)
    rng, held = np.random.default_rng(args.seed), np.random.default_rng(args.seed + 1)
    try:
        rows_held = batch(make_row, held, args.held or args.batch)
    except ValueError as e:  # words rows that do not fit 2 x --half tokens
        sys.exit(f"error: {e}")
    test = lm_batch(*rows_held)
    control = control_column(args, score, tok, pool, rows_held)
    n_held, length = rows_held[0].shape
    controls = "-" if args.task in ("fixed", "induction") else n_held  # control_column's
    print(f"held-out rows: {n_held} (tokens of {length}), control rows: {controls}")
    print(table_header(args.task, *rows_held))
    print("|---|---|---|---|---|")
    t0 = time.time()
    for i in range(args.steps + 1):
        if i % args.every == 0 or i == args.steps:
            nll, share = score(state.params, test)
            line = f"| {i} | {nll:.3f} | {share:.3f} | {control(state.params)} | "
            line += f"{time.time() - t0:.0f} |"
            print(line, flush=True)
        if i < args.steps:
            state = step(state, lm_batch(*batch(make_row, rng, args.batch)))
    print(f"name-copy probe after: {probe(cfg, state.params, rows)}")
    if args.export:
        from data.export_tokenizer import record_tokenizer
        from model.export import save_params

        save_params(args.export, cfg, state.params)
        record_tokenizer(args.export, spec)
        print(f"params saved: {args.export}")


if __name__ == "__main__":
    main()

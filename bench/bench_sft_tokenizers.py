"""The byte tokenizer against a code BPE vocabulary, side by side in one run (issue 52): the same
SFT documents, the same text a step, the same steps; then held-out bits per byte (tokenizer-
independent) and the name-copy probe, beside what a copier keyed on the last 1 / 2 / 3 tokens
would write of those names.

    python bench/bench_sft_tokenizers.py [--preset tiny] [--steps 300] [--bpe_vocab 4096]
    python bench/bench_sft_tokenizers.py --tiny      # smoke: 2 steps an arm, vocab 512

Documents: the committed expert traces cut after 3 assistant turns, 4 copies each with the
statement's symbols renamed afresh (bench/rl_stages.py sft_traces; data/rename.py), those within
--max_bytes bytes, written once and trained by both arms (configs/sft.py's loss: assistant tokens
only; train/'s loop from a random init of --preset sized to each vocabulary). Rows: --batch a
step of --seq_len bytes for the byte arm and --seq_len / --bytes_per_token tokens for the BPE arm
(about the same text a step). The BPE vocabulary is rl/envs/repos/vocabulary.py's (training
repositories only). Probe rows: eval/name_copy.py on --probe_traces committed traces as trained
and renamed afresh, those whose naming prefix is within 2,048 bytes: the same names in both arms,
each in its own tokenizer's ids.

Prints one markdown row per arm.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT]

from bench import rl_stages  # noqa: E402
from bench.bench_copy import keyed_probe  # noqa: E402
from bench.common import parse_tiny  # noqa: E402

TRACES = os.path.join(ROOT, "data/traces/repo_expert_traces.jsonl")
PROBE_LEN = 2048


def write_documents(path: str, max_bytes: int) -> int:
    """The renamed trace prefixes within max_bytes (byte tokens), written once; -> their count."""
    if not os.path.exists(path):
        with open(TRACES, encoding="utf-8") as f:
            traces = [json.loads(x) for x in f if x.strip()]
        docs = rl_stages.sft_traces(traces, renamed=4, turns=3, seed=0)
        docs = [d for d in docs if d["tokens"] <= max_bytes]
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
        os.replace(path + ".tmp", path)
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def final_bits_per_byte(workdir: str) -> float:
    """The loop's last held-out bits/byte (its TensorBoard scalar eval/bits_per_byte)."""
    import glob

    from train.tensorboard import read_scalars

    (events,) = glob.glob(os.path.join(workdir, "tb", "events.out.tfevents.*"))
    return [v for _, tag, v in read_scalars(events) if tag == "eval/bits_per_byte"][-1]


def probe_rows(tok, n: int) -> dict:
    """rl_stages.name_probe_rows in `tok`'s ids for the traces whose naming prefix is within
    PROBE_LEN bytes: the same names in every arm, each fitting its model's context."""
    from data.tokenizers import ByteTokenizer

    ours = rl_stages.name_probe_rows(TRACES, n, 10**9, tok)
    by_bytes = rl_stages.name_probe_rows(TRACES, n, 10**9, ByteTokenizer())
    out = {}
    for label, rows in ours.items():
        if len(rows) != len(by_bytes[label]):  # name_span finds a name under any tokenizer
            raise ValueError(f"{label}: {len(rows)} probe rows vs {len(by_bytes[label])} in bytes")
        out[label] = [r for r, b in zip(rows, by_bytes[label]) if len(b[0]) <= PROBE_LEN]
    return out


def arm(args, label: str, spec: str, seq_len: int, docs: str) -> str:
    """One arm: SFT from a random init on `docs` with tokenizer `spec`, then the probe -> a row."""
    from data.tokenizers import load_tokenizer
    from eval.name_copy import name_copy_probe
    from model.export import load_params

    tok = load_tokenizer(spec)
    workdir = os.path.join(args.workdir, label)
    c = rl_stages.sft_config(
        docs,
        preset=args.preset,
        mtp_modules=0,
        max_tokens=PROBE_LEN,
        steps=args.steps,
        lr=args.lr,
        batch_size=args.batch,
        seq_len=seq_len,
        tokenizer=spec,
    )
    t0 = time.time()
    cfg, params = load_params(rl_stages.train_and_export(c, workdir))
    wall = time.time() - t0
    rows = probe_rows(tok, args.probe_traces)
    unit = "byte" if spec == "byte" else "token"
    got = {k.split()[0]: name_copy_probe(cfg, params, r, PROBE_LEN) for k, r in rows.items()}
    probe = " / ".join(f"{g['names_exact']:.2f} ({g['name_bytes']:.3f})" for g in got.values())
    return (
        f"| {label} | {tok.vocab_size} | {args.batch} x {seq_len} | {args.steps} | "
        f"{final_bits_per_byte(workdir):.3f} | {probe} | {keyed_probe(rows, unit=unit)} | "
        f"{len(rows['fresh names'])} | {wall:.0f} | {os.getloadavg()[0]:.1f} |"
    )


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny", choices=("tiny", "tiny4"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seq_len", type=int, default=2048, help="the byte arm's row, in bytes")
    ap.add_argument("--bytes_per_token", type=int, default=4, help="the BPE row: seq_len / this")
    ap.add_argument("--bpe_vocab", type=int, default=4096)
    ap.add_argument("--max_bytes", type=int, default=2048, help="documents within this")
    ap.add_argument("--probe_traces", type=int, default=64)
    ap.add_argument("--workdir", default="runs/bench_sft_tokenizers")
    tiny = dict(steps=2, batch=2, seq_len=512, bpe_vocab=512, probe_traces=4)
    tiny.update(workdir=os.path.join(ROOT, "runs/bench_sft_tokenizers_tiny"))
    return parse_tiny(ap, tiny)


def main():
    from rl.envs.repos.vocabulary import write_vocabulary

    args = arguments()
    os.makedirs(args.workdir, exist_ok=True)
    docs = os.path.join(args.workdir, "documents.jsonl")
    n = write_documents(docs, args.max_bytes)
    vocab = os.path.join(args.workdir, f"code_bpe_{args.bpe_vocab}.json")
    if not os.path.exists(vocab):
        write_vocabulary(args.bpe_vocab, vocab)
    print(f"{n} documents ({docs}); vocabulary {vocab}", flush=True)
    print(
        "| tokenizer | ids | rows a step | steps | held-out bits/byte | probe: trained / fresh "
        "names, exact (share of tokens) | copier keyed on the last k tokens, share of a name's "
        "tokens after the first | probe rows | SFT wall s | load |\n" + "|---" * 10 + "|"
    )
    print(arm(args, "byte", "byte", args.seq_len, docs), flush=True)
    bpe_len = args.seq_len // args.bytes_per_token
    print(arm(args, f"code BPE {args.bpe_vocab}", f"hf:{vocab}", bpe_len, docs), flush=True)


if __name__ == "__main__":
    main()

"""This project vs PyTorch transformers' DeepSeek-V3 on the same config and the same weights, on
CPU.

    python bench/bench_vs_pytorch.py                  # train step + decode +
                                                        small-preset MFU (~3 min)
    python bench/bench_vs_pytorch.py --parts train    # only the train-step A/B
    python bench/bench_vs_pytorch.py --tiny           # smoke: 1 round of each at a few tokens, the
                                                        MFU part on the tiny preset at 2 x 32

Needs torch and transformers (`pip install -e .[fixtures]`); without them it says so and only runs
the small-preset MFU part.

1. Train step, float32, fwd + bwd + AdamW (+ global-norm clip 1.0 on both sides), batch 4 x 256:
   this project's jitted `train.step.train_step` with `train.losses.make_lm_loss` vs
   `DeepseekV3ForCausalLM` (its default attention/experts implementations) with torch.optim.AdamW.
   Weights: the HF model's random init, saved with save_pretrained and read back with
   model.hf.load_hf_checkpoint (the project's converter); the first loss is checked to agree.
   The two steps alternate, best-of-N each; prints the tokens/s ratio (> 1: this project is faster).
2. Batched greedy decode, batch 1/16/64, --prompt_len prompt + --new_tokens new tokens:
   the engine (model/engine/ through `model.prompt_batch.PromptBatch`, prefill excluded) vs
   `model.generate(..., do_sample=False)` timed the same way (its prefill included — one forward of
   the prompt, a few % of the run). Alternating.
3. Small-preset MFU: the same train step on model.presets 'small' (batch 8 x 256), with
   6 x active params per token, vs a same-run f32 matmul peak at 2048^3 (bench.common) and at the
   model's own matmul shapes ([B*T, D] x [D, F] etc.).

Every printed line carries the load average: the machine is shared, compare ratios, not seconds.
On a heavily loaded machine torch's OpenMP threads suffer more from oversubscription than XLA's,
which flatters this project; `taskset -c 0 python bench/bench_vs_pytorch.py` (one core each) is
steadier.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.malloc_env import reexec_with_hugepages  # noqa: E402

reexec_with_hugepages()  # the default launch's allocator setting (main.py applies it too)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import model  # noqa: E402
from bench.common import matmul_peak_flops, parse_tiny  # noqa: E402
from model import presets  # noqa: E402
from train import losses, optim, state, step  # noqa: E402

# The config: hidden 256, 4 layers (1 dense), 8 experts top-2 + 1 shared, q_lora 128,
# kv_lora 64.
HF_CONFIG = dict(
    vocab_size=2048,
    hidden_size=256,
    intermediate_size=768,
    moe_intermediate_size=256,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=128,
    kv_lora_rank=64,
    qk_nope_head_dim=64,
    qk_rope_head_dim=32,
    v_head_dim=64,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_shared_experts=1,
    first_k_dense_replace=1,
    n_group=1,
    topk_group=1,
    norm_topk_prob=True,
    routed_scaling_factor=2.5,
    max_position_embeddings=1024,
    num_nextn_predict_layers=0,
    tie_word_embeddings=False,
)
LR, WD, B1, B2, EPS = 1e-4, 0.1, 0.9, 0.95, 1e-8


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def cpu_model() -> str:
    """The host CPU's model name: ratios here moved from ~1.0x to ~1.4x between two hosts."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        return "unknown"


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------- this project


def jax_train(cfg, params, batch_size: int, seq_len: int):
    """-> (step() running one jitted train step, first loss)."""
    tx = optim.make_optimizer(
        params=params,
        logical_specs=model.param_logical_specs(cfg),
        trainable=model.trainable_mask(params),
        schedule=lambda _: LR,
        weight_decay=WD,
        b1=B1,
        b2=B2,
        eps=EPS,
        clip_norm=1.0,
    )
    # jitted so every leaf is its own buffer (the step donates the state)
    st = jax.jit(lambda p: state.create_train_state(p, tx, jax.random.PRNGKey(0)))(params)
    loss_fn = losses.make_lm_loss(cfg, use_balance_loss=False)
    fn = jax.jit(lambda s, b: step.train_step(s, b, loss_fn), donate_argnums=0)
    tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, (batch_size, seq_len + 1))
    pos = np.broadcast_to(np.arange(seq_len, dtype=np.int32), (batch_size, seq_len))
    batch = {
        "tokens": jnp.asarray(tokens[:, :-1], jnp.int32),
        "targets": jnp.asarray(tokens[:, 1:], jnp.int32),
        "positions": jnp.asarray(pos),
        "segment_ids": jnp.ones((batch_size, seq_len), jnp.int32),
        "loss_mask": jnp.ones((batch_size, seq_len), jnp.float32),
    }
    box = {"state": st}

    def run():
        box["state"], metrics = fn(box["state"], batch)
        return jax.block_until_ready(metrics["loss"])

    first = float(run())
    return run, first, tokens


# --------------------------------------------------------------------------- transformers


def torch_model(folder: str):
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(DeepseekV3Config(**HF_CONFIG))
    model.save_pretrained(folder)
    return model


def fresh_torch_model(folder: str):
    from transformers import DeepseekV3ForCausalLM

    return DeepseekV3ForCausalLM.from_pretrained(folder)


def torch_train(hf_model, tokens):
    import torch

    # The project's optimizer decays only >= 2-D params; do the same so both steps do equal work.
    decay = [p for p in hf_model.parameters() if p.ndim >= 2]
    rest = [p for p in hf_model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": WD}, {"params": rest, "weight_decay": 0.0}],
        lr=LR,
        betas=(B1, B2),
        eps=EPS,
    )
    hf_model.train()
    inp = torch.from_numpy(tokens[:, :-1]).long()
    tgt = torch.from_numpy(tokens[:, 1:]).long()

    def run():
        opt.zero_grad(set_to_none=True)
        logits = hf_model(input_ids=inp).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1)
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf_model.parameters(), 1.0)
        opt.step()
        return loss.item()

    first = run()
    return run, first


# --------------------------------------------------------------------------- A/B helpers


def alternate(fns: dict, rounds: int) -> dict:
    """Best seconds per call of each fn, the fns run in turn each round (shared-machine load hits
    them alike; the minimum is the least-disturbed run)."""
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def part_train(args, folder, hf_model):
    from model.hf import load_hf_checkpoint

    cfg, params = load_hf_checkpoint(folder, balance_loss_coef=0.0, moe_impl=args.moe_impl)
    params = jax.tree.map(jnp.asarray, params)
    jax_run, jax_first, tokens = jax_train(cfg, params, args.batch, args.seq_len)
    torch_run, torch_first = torch_train(hf_model, tokens)
    print(
        f"first loss: project {jax_first:.5f}  transformers {torch_first:.5f}  (same weights + "
        "batch)"
    )
    best = alternate({"project": jax_run, "transformers": torch_run}, args.rounds)
    n = args.batch * args.seq_len
    print(
        f"train step B={args.batch} T={args.seq_len} f32 fwd+bwd+AdamW, best of {args.rounds} "
        f"alternating ({load()}):"
    )
    for k, t in best.items():
        print(f"  {k:>13}: {t * 1e3:7.1f} ms/step  {n / t:8.0f} tokens/s")
    print(f"  ratio project/transformers tokens/s: {best['transformers'] / best['project']:.2f}x")


def part_decode(args, folder, hf_model):
    import torch

    from model.hf import load_hf_checkpoint
    from model.prompt_batch import PromptBatch

    cfg, params = load_hf_checkpoint(folder, moe_impl=args.moe_impl)
    params = jax.tree.map(jnp.asarray, params)
    hf_model.eval()
    rng = np.random.default_rng(1)
    print(
        f"greedy decode, prompt {args.prompt_len} + {args.new_tokens} new tokens, best of "
        f"{args.decode_rounds} alternating:"
    )
    for b in [int(x) for x in args.decode_batches.split(",")]:
        prompts = rng.integers(0, cfg.vocab_size, (b, args.prompt_len))

        def ours(prompts=prompts):
            eng = PromptBatch(cfg, params, [list(p) for p in prompts], args.new_tokens).prefill()
            jax.block_until_ready(eng.engine.state)
            t0 = time.perf_counter()
            eng.run_until_done()
            return time.perf_counter() - t0, eng

        def theirs(prompts=prompts):
            inp = torch.from_numpy(prompts).long()
            t0 = time.perf_counter()
            with torch.no_grad():
                out = hf_model.generate(
                    inp,
                    attention_mask=torch.ones_like(inp),
                    max_new_tokens=args.new_tokens,
                    min_new_tokens=args.new_tokens,
                    do_sample=False,
                )
            return time.perf_counter() - t0, out

        _, eng = ours()  # compile
        theirs()
        best = {"project": float("inf"), "transformers": float("inf")}
        for _ in range(args.decode_rounds):
            best["project"] = min(best["project"], ours()[0])
            best["transformers"] = min(best["transformers"], theirs()[0])
        n = b * args.new_tokens
        agree = _greedy_agreement(eng, theirs()[1], args.prompt_len)
        print(
            f"  batch {b:3d}: project {n / best['project']:7.0f} tok/s  transformers "
            f"{n / best['transformers']:7.0f} tok/s  ratio "
            f"{best['transformers'] / best['project']:.2f}x"
            f"  (first-token agreement {agree:.2f}; {load()})"
        )


def _greedy_agreement(engine, hf_out, prompt_len: int) -> float:
    ours = [s.tokens[0] for s in engine.results().sequences]
    theirs = hf_out[:, prompt_len].numpy()
    return float(np.mean(np.asarray(ours) == theirs))


# --------------------------------------------------------------------------- small-preset MFU


def model_shape_peak(cfg, n_tokens: int) -> float:
    """FLOP/s of the small preset's biggest matmul shapes (fwd shapes, f32), weighted by FLOPs."""
    d, v = cfg.hidden_size, cfg.vocab_size
    shapes = [
        (n_tokens, d, cfg.intermediate_size),
        (n_tokens, cfg.intermediate_size, d),
        (n_tokens, d, cfg.q_lora_rank),
        (n_tokens, cfg.q_lora_rank, cfg.num_attention_heads * cfg.qk_head_dim),
        (n_tokens, d, v),
        (n_tokens * cfg.num_experts_per_tok // cfg.n_routed_experts, d, cfg.moe_intermediate_size),
    ]
    flops = secs = 0.0
    for m, k, n in shapes:
        a = jnp.ones((m, k), jnp.float32)
        b = jnp.ones((k, n), jnp.float32)
        f = jax.jit(lambda a, b: a @ b)
        jax.block_until_ready(f(a, b))
        t = min(_timed(f, a, b) for _ in range(5))
        flops, secs = flops + 2 * m * k * n, secs + t
    return flops / secs


def _timed(f, *a) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(f(*a))
    return time.perf_counter() - t0


def part_mfu(args):
    cfg = presets.get(args.mfu_preset, num_mtp_modules=0, moe_impl=args.moe_impl)
    params = model.init_params(cfg, jax.random.PRNGKey(0))
    b, t = (int(x) for x in args.mfu_shape.split("x"))
    run, _, _ = jax_train(cfg, params, b, t)
    active = model.count_params(cfg)[1]
    best_step, peak, shape_peak = float("inf"), 0.0, 0.0
    for _ in range(args.rounds):  # alternate the step and both peaks
        best_step = min(best_step, _timed_call(run))
        peak = max(peak, matmul_peak_flops(args.peak_n, repeats=1))
        shape_peak = max(shape_peak, model_shape_peak(cfg, b * t))
    achieved = 6 * active * b * t / best_step
    print(
        f"{args.mfu_preset} preset train step B={b} T={t}: {best_step * 1e3:.0f} ms, "
        f"{b * t / best_step:.0f} tokens/s, 6 x {active / 1e6:.1f}M active = "
        f"{achieved / 1e9:.1f} GFLOP/s ({load()})"
    )
    print(
        f"  MFU vs {args.peak_n}^3 peak {peak / 1e9:.1f} GFLOP/s: {achieved / peak:.2f};  "
        f"vs model-shape peak {shape_peak / 1e9:.1f} GFLOP/s: {achieved / shape_peak:.2f}"
    )


def _timed_call(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="train,decode,mfu")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq_len", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--moe_impl", default="blocked")
    ap.add_argument("--decode_batches", default="1,16,64")
    ap.add_argument("--prompt_len", type=int, default=64)
    ap.add_argument("--new_tokens", type=int, default=64)
    ap.add_argument("--decode_rounds", type=int, default=2)
    ap.add_argument("--mfu_preset", default="small")
    ap.add_argument("--mfu_shape", default="8x256", help="BATCHxTOKENS of the MFU part")
    ap.add_argument("--peak_n", type=int, default=2048, help="matmul size of the MFU's peak")
    tiny = dict(batch=1, seq_len=16, rounds=1, decode_batches="1", prompt_len=4, new_tokens=2)
    tiny.update(decode_rounds=1, mfu_preset="tiny", mfu_shape="2x32", peak_n=256)
    args = parse_tiny(ap, tiny)
    parts = args.parts.split(",")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} cpus, {load()}")
    print(f"cpu: {cpu_model()}; allocator: GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '')!r}")
    torch_parts = [p for p in parts if p in ("train", "decode")]
    if torch_parts and not have_torch():
        print(
            f"skipping {torch_parts}: torch/transformers not installed (pip install -e .[fixtures])"
        )
    elif torch_parts:
        import torch
        import transformers

        # Same cores for both: XLA sizes its pool from the affinity mask, torch is told the same
        # (`taskset -c 0 python bench/...` then compares one core each, steadier on a busy machine).
        torch.set_num_threads(len(os.sched_getaffinity(0)))
        print(
            f"torch {torch.__version__} ({torch.get_num_threads()} threads), transformers "
            f"{transformers.__version__}"
        )
        with tempfile.TemporaryDirectory() as folder:
            hf_model = torch_model(folder)
            if "train" in parts:
                part_train(args, folder, hf_model)
            if "decode" in parts:
                # The train part stepped hf_model's weights in place: decode the saved ones.
                part_decode(args, folder, fresh_torch_model(folder))
    if "mfu" in parts:
        part_mfu(args)


if __name__ == "__main__":
    main()

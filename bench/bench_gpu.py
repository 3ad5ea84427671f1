"""One GPU benchmark, sized for six minutes on one H100/H200 (issue 41; not yet run on a GPU: its
--budget_s guard skips parts past 330 s): the matmul ceiling, the
kernels, the mid config's train step per MoE and attention implementation beside transformers', and
bf16 decode against the HBM roofline.

    python bench/bench_gpu.py                     # on the GPU: every part, the mid preset
    python bench/bench_gpu.py --tiny              # smoke scale on CPU (tests/test_bench_gpu.py)
    python bench/bench_gpu.py --parts memory      # compiled memory of the mid config, no GPU needed

What a GPU image lacks travels as wheels: `bash bench/gpu_wheels.sh` fills .whl/ (tokamax and its
pure-Python needs, grain, tensorboardX); the device command installs them with
`pip install --no-index --no-deps --target /tmp/site .whl/*.whl` first. tokamax imports
`xprof.cli.tools` at import time; xprof (~100 MB) stays behind and model/kernels/backend.py stubs it.

Parts (--parts, comma-separated; each train/hf/decode case runs in its own subprocess, so its peak
memory is its own and an out-of-memory fails that case only):
  ceiling  bf16 n^3 matmul TFLOP/s (n = 8192; 1024 with --tiny)
  kernels  grouped GEMM (tokamax) at the mid config's expert shapes, forward and forward+backward;
           training attention at B 8, T 2048, H 16, K 192 / V 128, causal, per implementation
  train    the train step (AdamW, clip 1.0, bf16 compute, f32 params) at batch 8 x 2048 per
           --variants 'moe:attention': ms, tokens/s, MFU vs the chip's datasheet bf16 peak (CPU: a
           measured matmul peak), peak memory (device peak; on CPU the compiled plan)
  hf       transformers' DeepseekV3ForCausalLM on the same config and batch: autocast bf16,
           grouped_mm experts, sdpa attention, torch AdamW
  decode   greedy decode with bf16 params and cache, prompt 256 + 128 new tokens, batch 16 and 64:
           tokens/s and % of the HBM roofline (bytes each step must read: every weight an expert
           choice can touch + the latent cache / the datasheet HBM bandwidth)
  memory   compiled memory analysis (no run) of the train step per variant, with 'opaque' shape-only
           kernels standing in for tokamax's where the backend has none (CPU)

Attention and MoE FLOPs are model FLOPs (causal attention counts the lower triangle; forward +
backward = 3x forward), the same counting as train MFU (model/params.py flops_per_token).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from model import presets  # noqa: E402

DEFAULT_VARIANTS = "tokamax:tokamax,tokamax:cudnn,blocked:tokamax,ragged:tokamax,tokamax:blocked"
TINY_VARIANTS = "blocked:blocked,ragged:blocked,dense:blocked"
# Datasheet HBM bandwidth per chip, bytes/s, by a substring of device_kind (most specific first).
HBM_BANDWIDTH = (("H100 PCIe", 2.0e12), ("H100", 3.35e12), ("H200", 4.8e12), ("A100", 2.0e12))


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def best_seconds(fn, repeats: int) -> float:
    jax.block_until_ready(fn())  # compile + warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def sizes(tiny: bool) -> dict:
    """The model and shapes: the mid preset at batch 8 x 2048, or a CPU smoke scale."""
    if tiny:
        return dict(preset="tiny", batch=2, seq=64, prompt=16, new=8, decode_batches=(4,))
    return dict(preset="mid", batch=8, seq=2048, prompt=256, new=128, decode_batches=(16, 64))


def model_config(tiny: bool, moe_impl: str = "auto", attention_impl: str = "auto"):
    cfg = presets.get(sizes(tiny)["preset"], moe_impl=moe_impl, attention_impl=attention_impl)
    return cfg.replace(dtype="bfloat16", num_mtp_modules=0)


# --- parts that run in this process ---------------------------------------------------------------


def part_ceiling(args) -> dict:
    n = 1024 if args.tiny else 8192
    a = jnp.ones((n, n), jnp.bfloat16)
    f = jax.jit(lambda x: x @ x)
    s = best_seconds(lambda: f(a), 5)
    return {"part": "ceiling", "n": n, "tflops": 2 * n**3 / s / 1e12}


def part_kernels(args) -> list[dict]:
    from model.kernels import attention as attn
    from model.kernels import gmm

    cfg = model_config(args.tiny)
    sz = sizes(args.tiny)
    rows = sz["batch"] * sz["seq"] * cfg.num_experts_per_tok
    d, f, e = cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    xs = jax.random.normal(keys[0], (rows, d), jnp.bfloat16)
    w = jax.random.normal(keys[1], (e, d, f), jnp.bfloat16) * 0.02
    group_sizes = jnp.full((e,), rows // e, jnp.int32)  # balanced: what the bias steers toward
    out = []
    gmm_impls = ("ragged",) if args.tiny else ("tokamax", "ragged")
    for impl in gmm_impls:
        run = lambda x, w, impl=impl: gmm.grouped_matmul(x, w, group_sizes, impl=impl)
        fwd = jax.jit(run)
        bwd = jax.jit(jax.grad(lambda x, w, run=run: run(x, w).astype(jnp.float32).sum(), (0, 1)))
        flops = 2 * rows * d * f
        for name, fn, mult in (("fwd", fwd, 1), ("fwd+bwd", bwd, 3)):
            s = best_seconds(lambda fn=fn: fn(xs, w), args.repeats)
            out.append({"part": "gmm", "impl": impl, "pass": name, "ms": s * 1e3,
                        "tflops": mult * flops / s / 1e12})  # fmt: skip
    b, t, h = sz["batch"], sz["seq"], cfg.num_attention_heads
    kq, kk, kv = jax.random.split(keys[2], 3)
    q = jax.random.normal(kq, (b, t, h, cfg.qk_head_dim), jnp.bfloat16)
    k = jax.random.normal(kk, (b, t, h, cfg.qk_head_dim), jnp.bfloat16)
    v = jax.random.normal(kv, (b, t, h, cfg.v_head_dim), jnp.bfloat16)
    pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    seg = jnp.ones((b, t), jnp.int32)
    flops = 2 * b * h * (t * (t + 1) / 2) * (cfg.qk_head_dim + cfg.v_head_dim)  # causal
    attn_impls = ("blocked",) if args.tiny else ("tokamax", "cudnn", "blocked")
    for impl in attn_impls:
        run = lambda q, k, v, impl=impl: attn.train_attention(
            q, k, v, q_positions=pos, q_segments=seg, k_positions=pos, k_segments=seg,
            scale=cfg.qk_head_dim**-0.5, impl=impl,
        )  # fmt: skip
        fwd = jax.jit(run)
        bwd = jax.jit(jax.grad(lambda *a, run=run: run(*a).astype(jnp.float32).sum(), (0, 1, 2)))
        for name, fn, mult in (("fwd", fwd, 1), ("fwd+bwd", bwd, 3)):
            try:
                s = best_seconds(lambda fn=fn: fn(q, k, v), args.repeats)
            except Exception as e:  # noqa: BLE001  (a kernel that does not fit this GPU: say so)
                out.append({"part": "attention", "impl": impl, "pass": name, "error": str(e)[:200]})
                continue
            out.append({"part": "attention", "impl": impl, "pass": name, "ms": s * 1e3,
                        "tflops": mult * flops / s / 1e12})  # fmt: skip
    return out


# --- cases that run in a subprocess each -----------------------------------------------------------


def _compiled_gib(m) -> float:
    """What a compiled program holds at once: arguments + outputs + temporaries, less donation."""
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    return (total - m.alias_size_in_bytes) / 2**30


def _peak_memory_gib(step, state, batch, mesh) -> float:
    """The device's own peak (this process ran one case), or on CPU, which keeps no such
    statistic, the compiled program's plan."""
    from model.sharding import DEFAULT_RULES, mesh_context

    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"] / 2**30
    with mesh_context(mesh, DEFAULT_RULES):
        return _compiled_gib(step.jitted.lower(state, batch).compile().memory_analysis())


def case_train(args, variant: str) -> dict:
    from bench.common import synthetic_batch, train_setup
    from model.params import flops_per_token
    from train import metrics as mx
    from train import sharding as shd

    moe_impl, attention_impl = variant.split(":")
    cfg = model_config(args.tiny, moe_impl, attention_impl)
    sz = sizes(args.tiny)
    state, step, mesh = train_setup(cfg, {"data": 1})
    batch = shd.global_batch(synthetic_batch(sz["batch"], sz["seq"], cfg.vocab_size), mesh)
    box = {"state": state}

    def run():
        box["state"], m = step(box["state"], batch)
        return m["loss"]

    s = best_seconds(run, args.repeats)
    tokens = sz["batch"] * sz["seq"]
    peak = mx.mfu_peak(mx.peak_matmul_size(cfg), "bfloat16", [jax.local_devices()[0]])
    achieved = tokens / s * flops_per_token(cfg, sz["seq"])
    return {"part": "train", "variant": variant, "ms": s * 1e3, "tokens_per_s": tokens / s,
            "mfu": achieved / peak.flops, "peak": peak.describe(),
            "peak_memory_gib": _peak_memory_gib(step, box["state"], batch, mesh)}  # fmt: skip


def hf_config(cfg) -> dict:
    return dict(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size, moe_intermediate_size=cfg.moe_intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_attention_heads, q_lora_rank=cfg.q_lora_rank,
        kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_head_dim,
        qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim,
        n_routed_experts=cfg.n_routed_experts, num_experts_per_tok=cfg.num_experts_per_tok,
        n_shared_experts=cfg.n_shared_experts, first_k_dense_replace=cfg.first_k_dense_replace,
        n_group=cfg.n_group, topk_group=cfg.topk_group, norm_topk_prob=cfg.norm_topk_prob,
        routed_scaling_factor=cfg.routed_scaling_factor,
        max_position_embeddings=cfg.max_position_embeddings, num_nextn_predict_layers=0,
        tie_word_embeddings=False,
    )  # fmt: skip


def case_hf(args) -> dict:
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    cfg = model_config(args.tiny)
    sz = sizes(args.tiny)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf_cfg = DeepseekV3Config(**hf_config(cfg))
    hf_cfg._attn_implementation = "sdpa"
    hf_cfg._experts_implementation = "grouped_mm"  # transformers >= 5: torch._grouped_mm experts
    torch.manual_seed(0)
    model = DeepseekV3ForCausalLM(hf_cfg).to(device)  # float32 params, like ours
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    tokens = torch.randint(0, cfg.vocab_size, (sz["batch"], sz["seq"] + 1), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            logits = model(input_ids=tokens[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    step()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    best = float("inf")
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t0)
    mem = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    used = getattr(model.config, "_experts_implementation", None)
    return {"part": "hf", "ms": best * 1e3, "tokens_per_s": sz["batch"] * sz["seq"] / best,
            "peak_memory_gib": mem, "experts": used,
            "attention": model.config._attn_implementation}  # fmt: skip


def decode_bytes_per_step(cfg, batch: int, context: int) -> float:
    """HBM bytes one greedy step must read at least: bf16 weights of everything but the unused
    experts' (an expert is unused by all B·k choices with probability (1 - k/E)^B) and embedding
    rows, plus the bf16 latent cache of `context` tokens per row."""
    from model import count_params
    from model.decode import cache_bytes_per_token

    total, _ = count_params(cfg)
    expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    unused = cfg.n_routed_experts * (1 - cfg.num_experts_per_tok / cfg.n_routed_experts) ** batch
    weights = total - cfg.vocab_size * cfg.hidden_size - cfg.num_moe_layers * unused * expert
    cache = batch * context * cache_bytes_per_token(cfg, "bfloat16", positions=False)
    return 2.0 * weights + cache


def hbm_bandwidth(kind: str) -> float | None:
    return next((bw for name, bw in HBM_BANDWIDTH if name in kind), None)


def case_decode(args, batch: int) -> dict:
    from model import init_params
    from model.prompt_batch import PromptBatch

    cfg = model_config(args.tiny).replace(decode_dtype="bfloat16")  # params + cache, also on CPU
    sz = sizes(args.tiny)
    params = init_params(
        cfg, jax.random.PRNGKey(0)
    )  # f32, as a trainer holds them: the engine casts
    prompts = np.random.default_rng(1).integers(0, cfg.vocab_size, (batch, sz["prompt"]))

    def generate():
        pb = PromptBatch(cfg, params, [list(p) for p in prompts], sz["new"]).prefill()
        jax.block_until_ready(pb.engine.state)
        t0 = time.perf_counter()
        pb.run_until_done()
        return time.perf_counter() - t0

    generate()  # compile
    best = min(generate() for _ in range(args.repeats))
    tok_s = batch * sz["new"] / best
    context = sz["prompt"] + sz["new"] // 2  # the mean context over the new tokens
    bw = hbm_bandwidth(jax.local_devices()[0].device_kind)
    roofline = batch * bw / decode_bytes_per_step(cfg, batch, context) if bw else None
    return {"part": "decode", "batch": batch, "tokens_per_s": tok_s,
            "roofline_tokens_per_s": roofline,
            "roofline_fraction": tok_s / roofline if roofline else None}  # fmt: skip


def case_memory(args, variant: str) -> dict:
    """Compiled memory of one train step, nothing allocated; tokamax's kernels become the 'opaque'
    stand-ins where the backend cannot compile them (CPU)."""
    from bench.common import synthetic_batch, train_setup
    from model.sharding import DEFAULT_RULES, mesh_context
    from train import sharding as shd

    moe_impl, attention_impl = variant.split(":")
    if jax.default_backend() == "cpu":
        moe_impl = "opaque" if moe_impl == "tokamax" else moe_impl
        attention_impl = "opaque" if attention_impl in ("tokamax", "cudnn") else attention_impl
    cfg = model_config(args.tiny, moe_impl, attention_impl)
    sz = sizes(args.tiny)
    state, step, mesh = train_setup(cfg, {"data": 1}, allocate=False)
    batch = shd.global_batch(synthetic_batch(sz["batch"], sz["seq"], cfg.vocab_size), mesh)
    with mesh_context(mesh, DEFAULT_RULES):
        m = step.jitted.lower(state, batch).compile().memory_analysis()
    return {"part": "memory", "variant": variant, "compiled_as": f"{moe_impl}:{attention_impl}",
            "arguments_gib": m.argument_size_in_bytes / 2**30,
            "temp_gib": m.temp_size_in_bytes / 2**30, "total_gib": _compiled_gib(m)}  # fmt: skip


CASES = {"train": case_train, "hf": case_hf, "decode": case_decode, "memory": case_memory}


def run_case(args, name: str, arg=None, timeout: int = 600) -> dict:
    """One case in a fresh process (its own memory peak; an OOM or crash fails it alone), or in
    this one with --in_process (the CPU smoke test: no process start-ups to pay for)."""
    if args.in_process:
        return CASES[name](args, *([] if arg is None else [arg]))
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--case",
        name,
        "--repeats",
        str(args.repeats),
    ]
    cmd += (["--case_arg", str(arg)] if arg is not None else []) + (["--tiny"] if args.tiny else [])
    env = dict(os.environ, XLA_PYTHON_CLIENT_MEM_FRACTION="0.95")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"part": name, "case": arg, "error": f"timed out after {timeout} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        err = p.stderr.strip().splitlines() or ["no output"]
        raised = [ln for ln in err if ln.split(":")[0].endswith(("Error", "Exception"))]
        return {"part": name, "case": arg, "error": (raised or err)[-1][:300]}
    return json.loads(lines[-1])


def fmt(row: dict) -> str:
    keys = [k for k in row if k != "part"]
    show = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    return f"  {row['part']:9s} " + "  ".join(f"{k} {show(row[k])}" for k in keys)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="ceiling,kernels,train,hf,decode")
    ap.add_argument("--variants", default=None, help="moe_impl:attention_impl,...")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke scale (the tiny preset)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--in_process", action="store_true", help="no subprocess per case")
    ap.add_argument("--budget_s", type=float, default=330, help="skip parts past this wall time")
    ap.add_argument("--json", default=None, help="also write every row to this JSON file")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--case_arg", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:  # a subprocess of run_case
        arg = args.case_arg
        arg = int(arg) if args.case == "decode" else arg
        print(json.dumps(CASES[args.case](args, *([] if arg is None else [arg]))))
        return
    t_start = time.perf_counter()
    dev = jax.local_devices()[0]
    print(f"bench_gpu: jax {jax.__version__} on {dev.platform} ({dev.device_kind}), {load()}")
    variants = (args.variants or (TINY_VARIANTS if args.tiny else DEFAULT_VARIANTS)).split(",")
    rows = []
    for part in args.parts.split(","):
        if time.perf_counter() - t_start > args.budget_s:
            rows.append({"part": part, "skipped": f"past the {args.budget_s:.0f} s budget"})
            print(fmt(rows[-1]), flush=True)
            continue
        if part == "ceiling":
            new = [part_ceiling(args)]
        elif part == "kernels":
            new = part_kernels(args)
        elif part in ("train", "memory"):
            new = [run_case(args, part, v) for v in variants]
        elif part == "hf":
            new = [run_case(args, "hf")]
        elif part == "decode":
            new = [run_case(args, "decode", b) for b in sizes(args.tiny)["decode_batches"]]
        else:
            raise SystemExit(f"error: unknown part {part!r}")
        for row in new:
            print(fmt(row), flush=True)
        rows += new
    print(f"bench_gpu: {time.perf_counter() - t_start:.0f} s, {load()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.device_kind, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""One GPU benchmark for a short device window (issue 53), that survives its own failures: the mid
config's train step per MoE and attention implementation beside transformers', bf16 decode
against the HBM roofline, the matmul ceiling and the kernels alone.

    bash bench/gpu_window.sh                      # on the GPU: the whole window (wheels, env, this)
    python bench/bench_gpu.py --jsonl rows.jsonl  # this part alone
    python bench/bench_gpu.py --tiny              # smoke scale on CPU (tests/test_bench_gpu.py)
    python bench/bench_gpu.py --parts memory      # compiled memory of the mid config, no GPU needed
    python bench/bench_gpu.py --parts lowering    # the GPU program's kernels, lowered on CPU

How it survives (issue 53: the first version ran parts in the parent, which then held 75% of the
GPU; checked its budget only between parts; wrote its JSON at the end):
  - this process never imports JAX: every case runs in a subprocess of its own (its memory peak is
    its own, and an out-of-memory or a crash fails that case alone), with the time left of the
    --budget_s as its limit (and at most --case_s, or a part's --part_s);
  - each row is printed and appended to --jsonl (one JSON object per line) the moment the case
    prints it; a case that fails, runs out of memory or times out leaves its row saying so
    (`error`, `oom`, `timeout`) and the run goes on with the next;
  - the train step runs first, the riskiest parts last; `ragged:tokamax` (ragged_dot's dense
    fallback: 216.6 GiB planned at batch 8, bench/RESULTS.md) is not a default variant.

Parts (--parts, comma-separated, run in that order; each is one or more cases):
  env      JAX, jaxlib, tokamax and device versions, memory limit of the device
  train    the train step (AdamW, clip 1.0, bf16 compute, f32 params) at batch 8 x 2048 per
           --variants 'moe:attention': ms, tokens/s, MFU vs the chip's datasheet bf16 peak (CPU: a
           measured matmul peak), peak memory (device peak; on CPU the compiled plan)
  hf       transformers' DeepseekV3ForCausalLM on the same config and batch: autocast bf16,
           grouped_mm experts, sdpa attention, torch AdamW
  decode   greedy decode with bf16 params and cache, prompt 256 + 128 new tokens, batch 16 and 64:
           tokens/s and % of the HBM roofline (bytes each step must read: every weight an expert
           choice can touch + the latent cache / the datasheet HBM bandwidth)
  ceiling  bf16 n^3 matmul TFLOP/s (n = 8192; 1024 with --tiny)
  kernels  grouped GEMM per implementation at the mid config's expert shapes, forward and
           forward+backward; training attention at B 8, T 2048, H 16, K 192 / V 128, causal, per
           implementation (one case each)
  memory   compiled memory analysis (no run) of the train step per variant, with 'opaque' shape-only
           kernels standing in for tokamax's where the backend has none (CPU)
  lowering the train step per variant lowered for an H200 on any machine (needs tokamax): kernel
           calls by kind (Mosaic GPU, Triton, cuDNN, XLA ragged_dot), float32 kernel operands,
           [B, H, t, S] score tensors (model/kernels/lowering.py)
  _fail, _hang   planted cases (a raise; a sleep past its limit) for the CPU test of the above

What a GPU image lacks travels as wheels (bench/gpu_wheels.sh fills .whl/; gpu_window.sh installs
them). tokamax imports `xprof.cli.tools` at import time; xprof (~100 MB) stays behind and
model/kernels/backend.py stubs it.

Attention and MoE FLOPs are model FLOPs (causal attention counts the lower triangle; forward +
backward = 3x forward), the same counting as train MFU (model/params.py flops_per_token).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DEFAULT_PARTS = "env,train,hf,decode,ceiling,kernels"
# Riskiest last: blocked MoE on a GPU runs the CPU loop's aligned layout (76.9 GiB planned).
DEFAULT_VARIANTS = "tokamax:tokamax,tokamax:cudnn,tokamax:blocked,blocked:tokamax"
TINY_VARIANTS = "blocked:blocked,ragged:blocked,dense:blocked"
GMM_IMPLS, TINY_GMM_IMPLS = ("tokamax", "ragged"), ("ragged",)
ATTENTION_IMPLS, TINY_ATTENTION_IMPLS = ("tokamax", "cudnn", "blocked"), ("blocked",)
MIN_CASE_S = 10  # a case given less than this is skipped: a JAX process takes seconds to start
# Datasheet HBM bandwidth per chip, bytes/s, by a substring of device_kind (most specific first).
HBM_BANDWIDTH = (("H100 PCIe", 2.0e12), ("H100", 3.35e12), ("H200", 4.8e12), ("A100", 2.0e12))
# Out-of-memory as XLA (RESOURCE_EXHAUSTED) and torch say it.
OOM_MARKERS = ("RESOURCE_EXHAUSTED", "out of memory", "OutOfMemoryError")


def load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def best_seconds(fn, repeats: int) -> float:
    import jax

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
    from model import presets

    cfg = presets.get(sizes(tiny)["preset"], moe_impl=moe_impl, attention_impl=attention_impl)
    return cfg.replace(dtype="bfloat16", num_mtp_modules=0)


# --- cases: each runs in a subprocess of its own and yields its rows ---------------------------


def case_env(args):
    import jax
    import jaxlib

    dev = jax.local_devices()[0]
    try:
        from model.kernels import backend

        tokamax = getattr(backend.tokamax(), "__version__", "importable")
    except ImportError as e:
        tokamax = f"missing ({e})"
    stats = dev.memory_stats() or {}
    yield {"part": "env", "jax": jax.__version__, "jaxlib": jaxlib.__version__,
           "platform": dev.platform, "device_kind": dev.device_kind,
           "devices": jax.local_device_count(), "tokamax": tokamax,
           "bytes_limit_gib": stats.get("bytes_limit", 0) / 2**30 or None,
           "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION")}  # fmt: skip


def case_ceiling(args):
    import jax
    import jax.numpy as jnp

    n = 1024 if args.tiny else 8192
    a = jnp.ones((n, n), jnp.bfloat16)
    f = jax.jit(lambda x: x @ x)
    s = best_seconds(lambda: f(a), 5)
    yield {"part": "ceiling", "n": n, "tflops": 2 * n**3 / s / 1e12}


def case_gmm(args, impl: str):
    """The grouped GEMM alone at the expert shapes, balanced groups: forward, forward+backward."""
    import jax
    import jax.numpy as jnp

    from model.kernels import gmm

    cfg, sz = model_config(args.tiny), sizes(args.tiny)
    rows = sz["batch"] * sz["seq"] * cfg.num_experts_per_tok
    d, f, e = cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    xs = jax.random.normal(keys[0], (rows, d), jnp.bfloat16)
    w = jax.random.normal(keys[1], (e, d, f), jnp.bfloat16) * 0.02
    group_sizes = jnp.full((e,), rows // e, jnp.int32)  # balanced: what the bias steers toward
    run = lambda x, w: gmm.grouped_matmul(x, w, group_sizes, impl=impl)
    fwd = jax.jit(run)
    bwd = jax.jit(jax.grad(lambda x, w: run(x, w).astype(jnp.float32).sum(), (0, 1)))
    flops = 2 * rows * d * f
    for name, fn, mult in (("fwd", fwd, 1), ("fwd+bwd", bwd, 3)):
        s = best_seconds(lambda fn=fn: fn(xs, w), args.repeats)
        yield {"part": "gmm", "impl": impl, "pass": name, "ms": s * 1e3,
               "tflops": mult * flops / s / 1e12}  # fmt: skip


def case_attention(args, impl: str):
    """Training attention alone, causal over one document per row: forward, forward+backward."""
    import jax
    import jax.numpy as jnp

    from model.kernels import attention as attn

    cfg, sz = model_config(args.tiny), sizes(args.tiny)
    b, t, h = sz["batch"], sz["seq"], cfg.num_attention_heads
    kq, kk, kv = jax.random.split(jax.random.PRNGKey(2), 3)
    q = jax.random.normal(kq, (b, t, h, cfg.qk_head_dim), jnp.bfloat16)
    k = jax.random.normal(kk, (b, t, h, cfg.qk_head_dim), jnp.bfloat16)
    v = jax.random.normal(kv, (b, t, h, cfg.v_head_dim), jnp.bfloat16)
    pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    seg = jnp.ones((b, t), jnp.int32)
    flops = 2 * b * h * (t * (t + 1) / 2) * (cfg.qk_head_dim + cfg.v_head_dim)  # causal
    run = lambda q, k, v: attn.train_attention(
        q, k, v, q_positions=pos, q_segments=seg, k_positions=pos, k_segments=seg,
        scale=cfg.qk_head_dim**-0.5, impl=impl,
    )  # fmt: skip
    fwd = jax.jit(run)
    bwd = jax.jit(jax.grad(lambda *a: run(*a).astype(jnp.float32).sum(), (0, 1, 2)))
    for name, fn, mult in (("fwd", fwd, 1), ("fwd+bwd", bwd, 3)):
        s = best_seconds(lambda fn=fn: fn(q, k, v), args.repeats)
        yield {"part": "attention", "impl": impl, "pass": name, "ms": s * 1e3,
               "tflops": mult * flops / s / 1e12}  # fmt: skip


def _compiled_gib(m) -> float:
    """What a compiled program holds at once: arguments + outputs + temporaries, less donation."""
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    return (total - m.alias_size_in_bytes) / 2**30


def _peak_memory_gib(step, state, batch, mesh) -> float:
    """The device's own peak (this process ran one case), or on CPU, which keeps no such
    statistic, the compiled program's plan."""
    import jax

    from model.sharding import DEFAULT_RULES, mesh_context

    stats = jax.local_devices()[0].memory_stats()
    if stats and "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"] / 2**30
    with mesh_context(mesh, DEFAULT_RULES):
        return _compiled_gib(step.jitted.lower(state, batch).compile().memory_analysis())


def case_train(args, variant: str):
    import jax

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
    yield {"part": "train", "variant": variant, "ms": s * 1e3, "tokens_per_s": tokens / s,
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


def case_hf(args):
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
    yield {"part": "hf", "ms": best * 1e3, "tokens_per_s": sz["batch"] * sz["seq"] / best,
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


def case_decode(args, batch: str):
    import jax
    import numpy as np

    from model import init_params
    from model.prompt_batch import PromptBatch

    batch = int(batch)
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
    yield {"part": "decode", "batch": batch, "tokens_per_s": tok_s,
            "roofline_tokens_per_s": roofline,
            "roofline_fraction": tok_s / roofline if roofline else None}  # fmt: skip


def case_memory(args, variant: str):
    """Compiled memory of one train step, nothing allocated; tokamax's kernels become the 'opaque'
    stand-ins where the backend cannot compile them (CPU)."""
    import jax

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
    yield {"part": "memory", "variant": variant, "compiled_as": f"{moe_impl}:{attention_impl}",
            "arguments_gib": m.argument_size_in_bytes / 2**30,
            "temp_gib": m.temp_size_in_bytes / 2**30, "total_gib": _compiled_gib(m)}  # fmt: skip


def case_lowering(args, variant: str):
    """The train step lowered for an H200 on any machine (model/kernels/lowering.py): kernel calls
    by kind, float32 kernel operands other than the attention residuals, score-shaped tensors."""
    import jax

    from bench.common import synthetic_batch, train_setup
    from model.kernels import lowering
    from model.sharding import DEFAULT_RULES, mesh_context

    moe_impl, attention_impl = variant.split(":")
    cfg, sz = model_config(args.tiny, moe_impl, attention_impl), sizes(args.tiny)
    b, t = sz["batch"], sz["seq"]
    t0 = time.perf_counter()
    with lowering.emulate("h200"):
        state, step, mesh = train_setup(cfg, {"data": 1}, allocate=False)
        batch = synthetic_batch(b, t, cfg.vocab_size)
        batch = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), batch)
        with mesh_context(mesh, DEFAULT_RULES):
            text = lowering.export_text(step.jitted, state, batch, target="h200")
    lse = f"{b}x{cfg.num_attention_heads}x{t}xf32"  # flash attention's log-sum-exp residuals
    f32 = [x for c in lowering.kernel_operands(text) for x in c if x.endswith("f32") and x != lse]
    scores = lowering.score_tensors(text, b, cfg.num_attention_heads, (t, 128), t)
    yield {"part": "lowering", "variant": variant, **lowering.kernel_counts(text),
           "f32_kernel_operands": len(f32), "score_tensors": len(scores),
           "lower_s": time.perf_counter() - t0}  # fmt: skip


def case_fail(args):
    """Planted: a case that measures one row, then raises (the CPU test's failing case)."""
    yield {"part": "_fail", "measured": 1}
    raise RuntimeError("planted failure")


def case_hang(args):
    """Planted: a case that never finishes (the CPU test's time-out)."""
    time.sleep(3600)
    yield {"part": "_hang"}


CASES = {
    "env": case_env,
    "train": case_train,
    "hf": case_hf,
    "decode": case_decode,
    "ceiling": case_ceiling,
    "gmm": case_gmm,
    "attention": case_attention,
    "memory": case_memory,
    "lowering": case_lowering,
    "_fail": case_fail,
    "_hang": case_hang,
}


def plan(args) -> list[tuple[str, str, str | None]]:
    """(part, case, its argument) in run order, from --parts and --variants."""
    variants = (args.variants or (TINY_VARIANTS if args.tiny else DEFAULT_VARIANTS)).split(",")
    out = []
    for part in args.parts.split(","):
        if part in ("train", "memory", "lowering"):
            out += [(part, part, v) for v in variants]
        elif part == "decode":
            out += [(part, part, str(b)) for b in sizes(args.tiny)["decode_batches"]]
        elif part == "kernels":
            out += [(part, "gmm", i) for i in (TINY_GMM_IMPLS if args.tiny else GMM_IMPLS)]
            attention = TINY_ATTENTION_IMPLS if args.tiny else ATTENTION_IMPLS
            out += [(part, "attention", i) for i in attention]
        elif part in CASES:
            out.append((part, part, None))
        else:
            raise SystemExit(f"error: unknown part {part!r}; known: {', '.join(CASES)}, kernels")
    return out


def child_env() -> dict:
    """The case's environment: JAX may take 95% of the GPU (the parent holds none of it). Only one
    of the two fraction variables may be set: jaxlib raises a ValueError when both are."""
    env = dict(os.environ)
    if "XLA_CLIENT_MEM_FRACTION" not in env:
        env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    return env


def error_row(part: str, case: str, arg, stderr: str, rc) -> dict:
    """A failed case's row: the last line of its error (the exception's, when one was raised)."""
    lines = stderr.strip().splitlines() or [f"exit status {rc}, no output"]
    raised = [ln for ln in lines if ln.split(":")[0].endswith(("Error", "Exception"))]
    oom = any(m in stderr for m in OOM_MARKERS)
    return {"part": part, "case": case, "arg": arg, "error": (raised or lines)[-1][:300],
            "oom": oom, "rc": rc}  # fmt: skip


def run_case(args, part: str, case: str, arg, limit_s: float, emit) -> None:
    """Runs one case in a subprocess, emitting each row it prints as it prints it; a time-out
    kills the case's process group and emits a row saying so, like a failure or an OOM."""
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--case",
        case,
        "--repeats",
        str(args.repeats),
    ]
    cmd += (["--case_arg", arg] if arg is not None else []) + (["--tiny"] if args.tiny else [])
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=child_env(),
                             start_new_session=True)  # fmt: skip
        lines: queue.Queue = queue.Queue()

        def read():
            for line in p.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + limit_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                os.killpg(p.pid, signal.SIGKILL)  # the case and anything it started
                p.wait()
                emit({"part": part, "case": case, "arg": arg,
                      "error": f"timed out after {limit_s:.0f} s", "timeout": True})  # fmt: skip
                return
            if line is None:
                break
            if line.startswith("{"):
                emit(json.loads(line))
        rc = p.wait()
        if rc:
            err.seek(0)
            emit(error_row(part, case, arg, err.read(), rc))


def fmt(row: dict) -> str:
    keys = [k for k in row if k != "part"]
    show = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)
    return f"  {row['part']:9s} " + "  ".join(f"{k} {show(row[k])}" for k in keys)


def make_emit(path: str | None):
    """print + append one JSON line to `path`, flushed: what was measured is on disk at once."""

    def emit(row: dict) -> None:
        print(fmt(row), flush=True)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")

    return emit


def run_child(args) -> None:
    """A case's own process: each row on stdout as it is measured."""
    for row in CASES[args.case](args, *([] if args.case_arg is None else [args.case_arg])):
        print(json.dumps(row), flush=True)


def run_in_process(args, emit) -> None:
    """--in_process (the CPU smoke test of every part: no process start-ups to pay for)."""
    for _, case, arg in plan(args):
        for row in CASES[case](args, *([] if arg is None else [arg])):
            emit(row)


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default=DEFAULT_PARTS)
    ap.add_argument("--variants", default=None, help="moe_impl:attention_impl,...")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke scale (the tiny preset)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget_s", type=float, default=480, help="total wall time of the run")
    ap.add_argument("--case_s", type=float, default=300, help="at most this per case")
    ap.add_argument("--part_s", default="", help="per-part caps, e.g. 'hf=120,_hang=3'")
    ap.add_argument("--jsonl", default=None, help="append every row to this JSON Lines file")
    ap.add_argument("--in_process", action="store_true", help="no subprocess per case (CPU test)")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--case_arg", default=None, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.case:
        return run_child(args)
    t_start = time.monotonic()
    emit = make_emit(args.jsonl)
    caps = dict(kv.split("=") for kv in args.part_s.split(",") if kv)
    emit({"part": "run", "parts": args.parts, "budget_s": args.budget_s, "tiny": args.tiny,
          "load": load(), "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip
    if args.in_process:
        run_in_process(args, emit)
    for part, case, arg in [] if args.in_process else plan(args):
        left = args.budget_s - (time.monotonic() - t_start)
        limit = min(left, args.case_s, float(caps.get(part, args.case_s)))
        if limit < min(MIN_CASE_S, float(caps.get(part, MIN_CASE_S))):
            emit({"part": part, "case": case, "arg": arg,
                  "skipped": f"{left:.0f} s left of the {args.budget_s:.0f} s budget"})  # fmt: skip
            continue
        run_case(args, part, case, arg, limit, emit)
    emit({"part": "end", "wall_s": time.monotonic() - t_start, "load": load()})


if __name__ == "__main__":
    main()

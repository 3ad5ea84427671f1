"""--dry_run: sizes, FLOPs and per-device bytes under the configured mesh, from shapes alone.

Works for a mesh of devices we do not have (config.dry_run_devices, e.g. 256 for kimi_k2):
params and optimizer state are jax.eval_shape'd, shardings come from the logical rules on an
AbstractMesh, and bytes are counted from shapes and partition specs. Nothing is allocated.

`report(config)` ends with the tokens per step (rows x seq_len, microbatches, tokens per context
shard), the attention implementation the plan counts, remat and moment dtype, and the per-chip
breakdown. `table(config)`: model/memory_plan.py's per-device plan, first for the run's own mesh,
batch and context (does it fit: against the real devices' memory limit, or for a described mesh
against each known layout of that many devices), then the candidate layouts at 8k and 32k.
"""

from __future__ import annotations

import functools
import os

import jax

import model
from model import memory_plan
from model.decode import cache_bytes_per_token, resolve_decode_dtype
from train import sharding as shd
from train import trainer
from train.config_check import check_config
from train.trainer import build_optimizer, model_config, model_rules


def report(config) -> str:
    cfg, _ = model_config(config)
    rules = model_rules(config)
    n_dev = config.dry_run_devices or jax.device_count()
    sizes = check_config(config, cfg, n_dev)
    mesh = shd.abstract_mesh(sizes, n_dev)
    tx, _ = build_optimizer(config, cfg)
    init_fn = functools.partial(model.params.init_params_unjitted, cfg)
    abstract = trainer.abstract_state(init_fn, tx)
    sh = trainer.state_shardings(init_fn, model.param_logical_specs(cfg), tx, mesh, rules)
    param_bytes = shd.bytes_per_device(abstract.params, sh.params, sizes)
    opt_bytes = shd.bytes_per_device(abstract.opt_state, sh.opt_state, sizes)
    total, active = model.count_params(cfg)
    t = config.train
    flops = model.flops_per_token(cfg, t.seq_len)
    gib = 2.0**30
    fused = memory_plan.planned_fused(cfg, accelerator=_accelerator(config))
    return "\n".join(
        [
            f"model {config.model}: {total:,} params total, {active:,} active per token",
            f"training FLOPs/token (seq_len {t.seq_len}): {flops:.3e}",
            f"mesh {sizes} on {n_dev} devices",
            f"per device: params {param_bytes / gib:.2f} GiB + optimizer state "
            f"{opt_bytes / gib:.2f} GiB"
            f" = {(param_bytes + opt_bytes) / gib:.2f} GiB",
            f"tokens per step: {t.batch_size} rows x {t.seq_len} = {t.batch_size * t.seq_len:,} "
            f"in {t.microbatches} microbatch(es); {t.seq_len // sizes['context']:,} tokens per "
            f"row per context shard (context {sizes['context']}); attention "
            f"{cfg.attention_impl} ({'fused' if fused else 'blocked'} in the plan), remat "
            f"{cfg.remat}, AdamW moments {t.get('moment_dtype', 'float32')}",
            *breakdown(config),
        ]
    )


def _accelerator(config) -> bool:
    """Whether the plan is for accelerators: a described pod mesh is, real devices say."""
    return bool(config.dry_run_devices) or jax.default_backend() in ("gpu", "tpu")


def _plan_args(config):
    """(cfg, sizes, seqs per shard per microbatch, moment bytes, fused, MoE dispatch) of the
    configured run."""
    cfg, _ = model_config(config)
    n_dev = config.dry_run_devices or len(trainer.trainer_devices(config))
    sizes = check_config(config, cfg, n_dev)
    t = config.train
    seqs = max(1, t.batch_size // (sizes["data"] * sizes["fsdp"]) // t.microbatches)
    moment_bytes = 2 if t.moment_dtype == "bfloat16" else 4
    acc = _accelerator(config)
    comm = memory_plan.planned_comm(cfg, n_dev, acc)
    return cfg, sizes, seqs, moment_bytes, memory_plan.planned_fused(cfg, acc), comm


def breakdown(config) -> list[str]:
    """The configured run's per-chip plan, component by component (model/memory_plan.py): the
    state that lives throughout plus the step's largest phase, then every phase's size."""
    p = planned_step_bytes(config)
    gib = lambda k: f"{p[k] / 2.0**30:.1f}"
    low = memory_plan.MEASURED_PLAN_OVER_XLA[0]
    if p["peak_phase"] == "backward":
        peak = (
            f"grads {gib('grads')} + accumulation carry {gib('accumulation_carry')} + saved "
            f"layer inputs/activations {gib('activations_saved')} + one layer's working set "
            f"{gib('layer_working_set')} (MoE buffers {gib('moe_buffers_per_layer')}) + logits "
            f"{gib('logits')}"
        )
    else:
        peak = f"the {p['peak_phase']} phase {gib('phase_' + p['peak_phase'])}"
    return [
        f"per-chip plan: params {gib('params')} + AdamW moments {gib('optimizer')} + {peak} = "
        f"{gib('total')} GiB",
        f"phases of the step beside params + moments (the largest counts): backward "
        f"{gib('phase_backward')}, "
        f"optimizer update {gib('phase_optimizer')}, embedding gradient {gib('phase_embedding')} "
        f"(its rematerialized lookup {gib('embedding_transient')})",
        f"with the plan's worst measured error (plan/XLA {low:.3f}, bench/RESULTS.md) XLA may "
        f"need {p['total'] / low / 2.0**30:.1f} GiB: 10% of the chip stays free on chips of "
        f"{p['total'] / low / 0.9 / 2.0**30:.1f} GiB or more",
    ]


def _budgets(n_dev: int, described: bool) -> dict:
    """Label -> usable bytes per device (None: unknown) for the run's own mesh."""
    if described:  # a mesh of devices we do not have: every known layout of that size
        found = {k: hbm for k, (n, hbm) in memory_plan.LAYOUTS.items() if n == n_dev}
        return found or {f"{n_dev} devices (memory unknown)": None}
    device = jax.local_devices()[0]
    limit = (device.memory_stats() or {}).get("bytes_limit")
    if limit:
        return {f"{n_dev} x {device.device_kind}": limit}
    # CPU devices share the host's RAM: each gets its share.
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        f"{n_dev} x {device.platform} (host RAM / {jax.local_device_count()})": host
        // jax.local_device_count()
    }


def run_rows(config, budgets: dict | None = None) -> list[str]:
    """The configured run's own rows: its mesh, train.seq_len, the sequences each batch shard
    computes at once (batch_size / (data x fsdp) / microbatches), its attention, remat and
    moments and, with microbatches, the accumulation's extra gradient, against `budgets` (label
    -> bytes per device; default: the devices', see _budgets)."""
    cfg, sizes, seqs, moment_bytes, fused, comm = _plan_args(config)
    n_dev = config.dry_run_devices or jax.device_count()
    mesh = tuple(sizes[a] for a in model.sharding.MESH_AXES)
    t = config.train
    budgets = budgets or _budgets(n_dev, bool(config.dry_run_devices))
    return [
        memory_plan.table_row(
            cfg,
            f"this run: {name}",
            mesh,
            t.seq_len,
            hbm,
            model_rules(config),
            seqs,
            t.microbatches,
            moment_bytes,
            fused,
            comm,
        )
        for name, hbm in budgets.items()
    ]


def table(config) -> str:
    """The run's own rows on top of the candidate layouts' table (at the run's context and at 8k
    and 32k; moments as configured)."""
    cfg, _, _, moment_bytes, _, _ = _plan_args(config)
    seq_lens = sorted({config.train.seq_len, 8192, 32768})
    return memory_plan.dry_run_table(
        cfg, seq_lens, rules=model_rules(config), first_rows=tuple(run_rows(config)),
        moment_bytes=moment_bytes,
    )  # fmt: skip


SAMPLER_CONTEXTS = (32_768, 262_144)  # the episode lengths the RL plan prints (32k and 256k)


def sampler_report(config) -> str:
    """RL configs (a `rl` block): each sampler engine's per-device bytes on its own mesh
    (rl.sampler_mesh over rl.sampler_devices) for rl.coding.slots concurrent episodes at 32k and
    256k tokens, and the bytes each trainer host pushes per weight version."""
    rl = config.rl
    cfg, _ = model_config(config)
    n = rl.sampler_devices or 1
    sizes = dict(zip(model.sharding.MESH_AXES, model.sharding.mesh_shape(dict(rl.sampler_mesh), n)))
    episodes = rl.coding.slots
    gib = 2.0**30
    # The plan is for the accelerators the mesh describes: decode_dtype 'auto' is bfloat16 there.
    dt = resolve_decode_dtype(cfg.decode_dtype, "accelerator")
    values = cache_bytes_per_token(cfg, dt, positions=False)
    per_token = cache_bytes_per_token(cfg, dt)
    lines = [
        f"sampler mesh {sizes} on {n} devices, {episodes} concurrent episodes per engine, cache "
        f"split {rl.coding.cache_split!r}; latent "
        f"cache per token per sequence: {values / 1024:.1f} KiB of {dt} latent + rope, "
        f"{per_token / 1024:.1f} KiB with the int32 positions (counted below; decode_dtype="
        f"{cfg.decode_dtype}; float32 cache: "
        f"{cache_bytes_per_token(cfg, 'float32') / 1024:.1f} KiB)"
    ]
    for context in SAMPLER_CONTEXTS:
        p = memory_plan.sampler_plan(
            cfg, sizes, episodes, context, model_rules(config), dt,
            cache_split=rl.coding.cache_split,
        )  # fmt: skip
        lines.append(
            f"  {context // 1024}k tokens: per device {dt} weights {p['weights'] / gib:.1f} GiB + "
            f"latent cache {p['kv_cache'] / gib:.1f} GiB + MoE buffers (one layer; decode "
            f"{p['moe_buffers_decode'] / gib:.2f}, an 8k-token prefill "
            f"{p['moe_buffers_prefill'] / gib:.2f}) = {p['total'] / gib:.1f} GiB"
        )
    trainer_devices = config.dry_run_devices or jax.device_count()
    push = memory_plan.weight_push_bytes(cfg, trainer_devices, config.devices_per_host)
    lines.append(
        f"weight push per version per trainer host ({push['hosts']} hosts): full bf16 snapshot "
        f"{push['full'] / 1e9:.2f} GB, delta at 2% {push['delta_2pct'] / 1e9:.2f} GB, at 5% "
        f"{push['delta_5pct'] / 1e9:.2f} GB"
    )
    return "\n".join(lines)


# --- the plan against XLA's compiled memory (bench/bench_memory_plan.py, tests) -----------------


def compiled_step_bytes(config) -> dict:
    """XLA's compiled memory analysis of the configured train step on the real (or simulated CPU)
    devices, per device: arguments (state + batch), outputs, donated aliases, temporaries, and
    'total' = arguments + outputs - aliases + temporaries (what one device holds at the peak).
    Compiles, allocates nothing: the state and batch are shapes."""
    import jax.numpy as jnp

    run = trainer.build(config)
    t = config.train
    step = trainer.jit_train_step(
        run.loss_fn, run.state_shardings(), run.mesh, run.rules, num_microbatches=t.microbatches
    )
    shape = (t.batch_size, t.seq_len)
    batch = {k: jax.ShapeDtypeStruct(shape, jnp.int32) for k in ("tokens", "targets")}
    batch |= {k: jax.ShapeDtypeStruct(shape, jnp.int32) for k in ("positions", "segment_ids")}
    batch["loss_mask"] = jax.ShapeDtypeStruct(shape, jnp.float32)
    with trainer.mesh_context(run.mesh, run.rules):
        compiled = step.jitted.lower(run.abstract_state(), batch).compile()
    m = compiled.memory_analysis()
    out = {
        "arguments": m.argument_size_in_bytes,
        "outputs": m.output_size_in_bytes,
        "aliases": m.alias_size_in_bytes,
        "temporaries": m.temp_size_in_bytes,
    }
    out["total"] = out["arguments"] + out["outputs"] - out["aliases"] + out["temporaries"]
    out["compiled"] = compiled
    return out


def planned_step_bytes(config) -> dict:
    """The plan (model/memory_plan.py) of the configured run, as breakdown() prints it."""
    cfg, sizes, seqs, moment_bytes, fused, comm = _plan_args(config)
    t = config.train
    return memory_plan.memory_plan(
        cfg, sizes, t.seq_len, seqs, model_rules(config), moment_bytes=moment_bytes,
        fused_attention=fused, microbatches=t.microbatches, moe_comm=comm,
        trained=_trained(t, cfg),
    )  # fmt: skip


def _trained(t, cfg) -> str:
    """Which params the configured loss gives a gradient (memory_plan.gradient_bytes): the MTP
    modules run only with their loss on (train/losses.py make_lm_loss), and
    train.trainable='mtp' puts the trunk behind stop_gradient."""
    if t.trainable == "mtp":
        return "mtp"
    with_mtp = t.mtp_mode != "none" and t.mtp_weight > 0 and cfg.num_mtp_modules > 0
    return "all" if with_mtp or not cfg.num_mtp_modules else "trunk"

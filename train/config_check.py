"""Config checks that must fail before anything is compiled, each in one line: every stage's
(train, mesh, checkpoint), every mode's decode dtype, and the RL block's (the trainer's handshake
with the samplers, and each RL task's own block, called from its entry in rl/sampling/rl_tasks.py).
Checks only: what a check implies (e.g. rl.valid_vocab set to the tokenizer's) is set by the caller.
"""

from __future__ import annotations

from train.sharding import MESH_AXES, ConfigError, resolve_mesh_shape

_CHOICES = {
    "optimizer": ("adamw", "muon"),
    "schedule": ("cosine", "wsd", "constant"),
    "mtp_mode": ("none", "ce", "distill"),
    "compute_dtype": ("auto", "float32", "bfloat16"),
    "trainable": ("all", "mtp"),
}


def check_run_config(config) -> None:
    """What every mode reads, checked before it loads anything: the engines' decode dtype."""
    from model.config import DECODE_DTYPES

    if config.decode_dtype not in DECODE_DTYPES:
        raise ConfigError(f"decode_dtype={config.decode_dtype!r}: expected one of {DECODE_DTYPES}")


def check_config(config, model_cfg, num_devices: int, num_processes: int = 1) -> dict:
    """Returns the resolved mesh sizes; raises ConfigError naming the field at fault."""
    t = config.train
    for field, choices in _CHOICES.items():
        if t[field] not in choices:
            raise ConfigError(f"train.{field}={t[field]!r}: expected one of {choices}")
    for field in ("batch_size", "seq_len", "microbatches", "log_every", "eval_every"):
        if t[field] <= 0:
            raise ConfigError(f"train.{field}={t[field]}: must be > 0")
    if t.mtp_lr < 0:
        raise ConfigError(
            f"train.mtp_lr={t.mtp_lr}: must be >= 0 (0: the MTP modules use train.lr)"
        )
    if t.steps < 0 or (t.steps == 0 and t.schedule != "constant"):
        raise ConfigError(
            f"train.steps={t.steps}: must be > 0 (0 = until the batch source ends, with "
            "train.schedule='constant')"
        )
    if t.trainable == "mtp" and (t.mtp_mode == "none" or not model_cfg.num_mtp_modules):
        raise ConfigError(
            "train.trainable='mtp' trains only the MTP modules: it needs train.mtp_mode 'ce' or "
            f"'distill' (got {t.mtp_mode!r}) and a model with MTP modules "
            f"(num_mtp_modules={model_cfg.num_mtp_modules})"
        )
    if config.checkpoint.every_steps <= 0:
        raise ConfigError(f"checkpoint.every_steps={config.checkpoint.every_steps}: must be > 0")
    mesh = dict(zip(MESH_AXES, resolve_mesh_shape(dict(config.mesh), num_devices)))
    heads = model_cfg.num_attention_heads
    if heads % mesh["tensor"]:
        raise ConfigError(
            f"model num_attention_heads={heads} is not divisible by mesh.tensor={mesh['tensor']}"
        )
    experts = getattr(model_cfg, "n_routed_experts", 0) or 0
    if experts and experts % mesh["expert"]:
        raise ConfigError(
            f"model n_routed_experts={experts} is not divisible by mesh.expert={mesh['expert']}"
        )
    rows = mesh["data"] * mesh["fsdp"]
    if t.batch_size % rows:
        raise ConfigError(
            f"train.batch_size={t.batch_size} is not divisible by mesh data*fsdp={rows}"
        )
    if t.batch_size % num_processes:
        raise ConfigError(
            f"train.batch_size={t.batch_size} is not divisible by {num_processes} hosts"
        )
    if (t.batch_size // rows) % t.microbatches and t.batch_size % t.microbatches:
        raise ConfigError(
            f"train.batch_size={t.batch_size} is not divisible by "
            f"train.microbatches={t.microbatches}"
        )
    cp = mesh["context"]
    if cp > 1 and t.seq_len % (2 * cp):
        raise ConfigError(
            f"train.seq_len={t.seq_len} is not divisible by 2 x mesh.context={cp} (zig-zag chunks)"
        )
    if cp > 1 and t.mtp_mode != "none":
        raise ConfigError(
            f"train.mtp_mode={t.mtp_mode!r} with mesh.context={cp}: MTP targets shift along the "
            "sequence, which context parallelism reorders; use train.mtp_mode='none'"
        )
    max_len = model_cfg.max_position_embeddings
    if t.seq_len > max_len:
        raise ConfigError(
            f"train.seq_len={t.seq_len} exceeds model max_position_embeddings={max_len}"
        )
    return mesh


# -- the RL block (configs/rl.py): rl/learning/loop.resolve calls these, and each RL task's entry
# (rl/sampling/rl_tasks.py) the ones for its own block, before any model loads.


def check_rl(config, num_devices: int) -> None:
    """The rl block against the trainer: rows and row length, the sampler/trainer handshake, the
    device split in threads mode."""
    rl, t = config.rl, config.train
    # rows per episode (summaries: rl/episodes/records.py)
    rows = rl.groups_per_batch * rl.group_size * rl.segments_per_chain
    if t.batch_size != rows or t.seq_len != rl.max_tokens:
        raise ConfigError(
            f"train.batch_size={t.batch_size} / train.seq_len={t.seq_len}: RL trains "
            f"rl.groups_per_batch x rl.group_size x rl.segments_per_chain = {rows} rows of "
            f"rl.max_tokens = {rl.max_tokens} tokens (leave train.batch_size and train.seq_len "
            "to configs/rl.py)"
        )
    if rl.synchronous and rl.dynamic_sampling:
        # a synchronous sampler starts batch b's groups only after step b; a skipped (tied) group
        # of batch b is then never replaced and the trainer waits for it forever
        raise ConfigError(
            "rl.synchronous with rl.dynamic_sampling: a skipped group is never replaced before "
            "the next step, so the run would wait forever (turn one off)"
        )
    need = rl.groups_per_batch + rl.groups_per_call - 1
    if not rl.synchronous and rl.max_ahead < need:
        # a batch waits with up to groups_per_batch - 1 groups read (pending), which count as
        # ahead of the trainer (rl/learning/batch_source.py progress_of): a sampler must still be
        # able to write its next groups_per_call, or both sides wait for each other
        raise ConfigError(
            f"rl.max_ahead={rl.max_ahead}: must be >= rl.groups_per_batch + rl.groups_per_call"
            f" - 1 = {need}, or the trainer and the samplers can wait for each other forever"
        )
    n_sampler = rl.sampler_devices
    if n_sampler and rl.mode == "threads":
        # roles mapped to meshes in one process: samplers on the last N devices, the trainer on
        # the others (disjoint sets)
        if n_sampler >= num_devices or config.trainer_devices + n_sampler > num_devices:
            raise ConfigError(
                f"rl.sampler_devices={n_sampler} + trainer_devices={config.trainer_devices}: "
                f"more than the {num_devices} devices of this process (threads share one process)"
            )


def check_rl_mtp(rl, num_mtp_modules: int) -> None:
    """rl.mtp_weight > 0 distills MTP heads the model must have."""
    if rl.mtp_weight > 0 and not num_mtp_modules:
        raise ConfigError(
            f"rl.mtp_weight={rl.mtp_weight}: the model has no MTP modules (set it to 0)"
        )


def check_rl_vocab(rl, vocab: int) -> None:
    """A task that samples from `vocab` ids: rl.valid_vocab is unset (0) or that."""
    if rl.valid_vocab not in (0, vocab):
        raise ConfigError(
            f"rl.valid_vocab={rl.valid_vocab}: rl.task={rl.task} samples from {vocab}"
        )


def check_rl_summary_toy(rl, vocab: int) -> None:
    """rl.task='summary_toy': two segments a chain, samples and loss on the toy's `vocab` ids."""
    if rl.segments_per_chain < 2 or rl.valid_vocab not in (0, vocab):
        raise ConfigError(
            f"rl.task=summary_toy: needs rl.segments_per_chain >= 2 (got {rl.segments_per_chain})"
            f" and rl.valid_vocab 0 (set to {vocab}), got {rl.valid_vocab}"
        )


def check_rl_coding(rl, summary_segments: int) -> None:
    """rl.task='coding': summaries, shared prefixes and the engine agree. summary_segments: the
    chain's max segments when rl.coding.summary is on (rl/envs/agent/summary.py), else 0."""
    per_chain = rl.segments_per_chain
    if summary_segments and per_chain < summary_segments:
        raise ConfigError(
            f"rl.coding.summary.max_segments={summary_segments}: set rl.segments_per_chain "
            f"to it (one training row per segment; got {per_chain})"
        )
    if summary_segments and rl.speculative_k:
        # a summary rewinds the episode's slot to the shared prefix (RolloutEngine.rewind), which
        # the speculative engine's MTP buffer (the old sequence's last positions) cannot follow
        raise ConfigError(
            f"rl.speculative_k={rl.speculative_k} with rl.coding.summary: summaries need a plain "
            "engine (set rl.speculative_k=0)"
        )
    n = rl.coding.shared_prefix_turns
    if n and not (0 < n < rl.coding.max_turns and not summary_segments):
        raise ConfigError(
            f"rl.coding.shared_prefix_turns={n}: needs 0 < it < rl.coding.max_turns="
            f"{rl.coding.max_turns} and no rl.coding.summary (a snapshot holds one segment)"
        )

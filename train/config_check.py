"""Config checks that must fail before anything is compiled, each in one line."""

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

"""Logical axis names: defined here once, mapped to mesh axes by rules from the run config.

Modules annotate params (and a few activations at block boundaries) with these names; they never
name mesh axes. `DEFAULT_RULES` maps them onto the mesh axes ('data', 'fsdp', 'expert', 'tensor'):
FSDP shards every large weight over 'fsdp' along the model dim; experts go over 'expert'; heads and
FFN width over 'tensor'; the batch over ('data', 'fsdp').
"""

from __future__ import annotations

import flax.linen as nn

# Parameter axes.
LAYERS = "layers"  # stacked (scanned) layer axis
VOCAB = "vocab"
EMBED = "embed"  # model dim D
HEADS = "heads"
HEAD_DIM = "head_dim"
Q_LATENT = "q_latent"  # q_lora_rank
KV_LATENT = "kv_latent"  # kv_lora_rank (+ rope dims on the kv_a output)
MLP = "mlp"  # FFN width F
EXPERT = "expert"  # E
# Activation axes.
BATCH = "batch"
SEQ = "seq"
ACT_EMBED = "act_embed"

MESH_AXES = ("data", "fsdp", "expert", "tensor")

DEFAULT_RULES: tuple[tuple[str, object], ...] = (
    (LAYERS, None),
    (VOCAB, "tensor"),
    (EMBED, "fsdp"),
    (HEADS, "tensor"),
    (HEAD_DIM, None),
    (Q_LATENT, None),
    (KV_LATENT, None),
    (MLP, "tensor"),
    (EXPERT, "expert"),
    (BATCH, ("data", "fsdp")),
    (SEQ, None),
    (ACT_EMBED, None),
)


def constrain(x, axes: tuple):
    """Activation sharding hint by logical names (a no-op outside a mesh + rules context)."""
    return nn.with_logical_constraint(x, axes)

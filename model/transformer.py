"""The DeepSeek-V3 / Kimi-K2 decoder: embedding → dense layers → MoE layers → norm → head, plus
sequential multi-token-prediction (MTP) modules.

Letters: B batch, T sequence, D model, V vocab, k experts per token, E experts, M MTP modules.

Layers of each kind (dense, MoE) are stacked with `nn.scan`, so compile time does not grow with
depth and params carry a leading 'layers' axis. `cfg.remat` picks what the backward pass saves.

MTP (DeepSeek-V3 §2.2): module m (0-based) combines RMSNorm(h_{m}) and RMSNorm(embed(token[t+m+1]))
→ eh_proj → one decoder block → shared head; its logits at position t predict token t+m+2
(the main head's predict t+1). h_0 is the main model's final hidden state after the final norm
(as served checkpoints feed it to their MTP layer).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from model import context
from model import sharding as sh
from model.attention import MLA
from model.config import ModelConfig
from model.layers import MLP, RMSNorm, cast, dense_init, logical_param, matmul2d
from model.moe import MoE

REMAT_POLICIES = {
    "full": jax.checkpoint_policies.nothing_saveable,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
}


@flax.struct.dataclass
class ModelOutput:
    logits: jnp.ndarray  # [B,T,V] float32
    mtp_logits: jnp.ndarray | None = None  # [M,B,T,V] float32; [m][:, t] predicts token t+m+2
    expert_ids: jnp.ndarray | None = None  # [n_moe_layers,B,T,k] int32
    expert_counts: jnp.ndarray | None = None  # [n_moe_layers,E] int32 (padding excluded)
    mtp_expert_counts: jnp.ndarray | None = None  # [M,E] int32 when MTP blocks are MoE
    balance_loss: Any = 0.0  # float32 scalar, already times balance_loss_coef
    # int32 scalar: non-padding assignments the capacity limit dropped, over every MoE layer run
    # (main stack + MTP blocks); set only when cfg.moe_capacity_factor > 0 (dropless otherwise)
    moe_dropped: jnp.ndarray | None = None
    hidden: jnp.ndarray | None = None  # [B,T,D] final hidden (after final norm)
    cache: dict | None = None  # updated latent caches when decoding


class Block(nn.Module):
    """Pre-norm decoder block: x + MLA(norm(x)), then + (MoE|MLP)(norm(x))."""

    cfg: ModelConfig
    moe: bool

    @nn.compact
    def __call__(self, carry, positions, segment_ids, forced_ids):
        """carry: x [B,T,D], or (x, this layer's latent cache) when decoding (model/decode.py runs
        blocks one by one); -> (carry, aux)."""
        c = self.cfg
        x, cache = carry if isinstance(carry, tuple) else (carry, None)
        x = sh.constrain(x, (sh.BATCH, sh.SEQ, sh.ACT_EMBED))
        attn_out, new_cache = MLA(c, name="attn")(
            RMSNorm(c.hidden_size, c.rms_norm_eps, name="attn_norm")(x),
            positions,
            segment_ids,
            cache,
        )
        x = x + attn_out
        h = RMSNorm(c.hidden_size, c.rms_norm_eps, name="mlp_norm")(x)
        if self.moe:
            out = MoE(c, name="moe")(h, segment_ids, forced_ids)
            x = x + out.y
            aux = (out.expert_ids, out.expert_counts, out.balance_loss, out.dropped)
        else:
            x = x + MLP(
                c.hidden_size, c.intermediate_size, c.initializer_range, c.dtype, name="mlp"
            )(h)
            aux = ()
        return (x if cache is None else (x, new_cache)), aux


def scan_unroll(cfg: ModelConfig, length: int) -> int:
    """Shallow stacks unroll fully: scanning 4 layers costs ~10 ms/step on CPU in stacking and
    re-slicing saved activations, while unrolled compile time only matters for deep models."""
    if cfg.scan_unroll:
        return min(cfg.scan_unroll, length)
    return length if length <= 4 else 1


def _layer_stack(cfg: ModelConfig, moe: bool, length: int, name: str):
    block = Block
    if cfg.remat != "none":
        block = nn.remat(Block, prevent_cse=False, policy=REMAT_POLICIES[cfg.remat])
    scanned = nn.scan(
        block,
        variable_axes={"params": 0},
        split_rngs={"params": True},
        in_axes=(nn.broadcast, nn.broadcast, 0),
        length=length,
        unroll=scan_unroll(cfg, length),
        metadata_params={nn.PARTITION_NAME: sh.LAYERS},
    )
    return scanned(cfg, moe, name=name)


class MTPModule(nn.Module):
    cfg: ModelConfig
    moe: bool

    @nn.compact
    def __call__(self, h_prev, next_embed, positions, segment_ids, cache=None):
        """h_prev, next_embed [B,T,D] -> (h [B,T,D] after shared_head norm, block aux)."""
        c = self.cfg
        d = c.hidden_size
        e_norm = RMSNorm(d, c.rms_norm_eps, name="enorm")(next_embed)
        h_norm = RMSNorm(d, c.rms_norm_eps, name="hnorm")(h_prev)
        w_eh = logical_param(
            self, "eh_proj", (2 * d, d), (None, sh.EMBED), dense_init(c.initializer_range)
        )
        joined = jnp.concatenate([e_norm, h_norm], axis=-1)  # [B,T,2D]: embed first, as DeepSeek
        x = matmul2d(joined, w_eh, c.dtype)  # [B,T,D]
        carry, aux = Block(c, self.moe, name="block")(
            x if cache is None else (x, cache), positions, segment_ids, None
        )
        x, new_cache = carry if cache is not None else (carry, None)
        return x, RMSNorm(d, c.rms_norm_eps, name="head_norm")(x), aux, new_cache


class Transformer(nn.Module):
    cfg: ModelConfig

    def setup(self):
        c = self.cfg
        init = dense_init(c.initializer_range)
        self.embed = logical_param(
            self, "embed", (c.vocab_size, c.hidden_size), (sh.VOCAB, sh.EMBED), init
        )
        if c.num_dense_layers:
            self.dense_layers = _layer_stack(c, False, c.num_dense_layers, "dense_layers")
        if c.num_moe_layers:
            self.moe_layers = _layer_stack(c, True, c.num_moe_layers, "moe_layers")
        self.final_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        if not c.tie_word_embeddings:
            self.lm_head = logical_param(
                self, "lm_head", (c.hidden_size, c.vocab_size), (sh.EMBED, sh.VOCAB), init
            )
        self.mtp = [MTPModule(c, c.mtp_is_moe, name=f"mtp_{m}") for m in range(c.num_mtp_modules)]

    def embed_tokens(self, tokens):
        return jnp.take(self.embed, tokens, axis=0).astype(jnp.dtype(self.cfg.dtype))

    def head(self, h):
        """Final-normed hidden [B,T,D] -> float32 logits [B,T,V] with the shared output head."""
        w = self.embed.T if self.cfg.tie_word_embeddings else self.lm_head
        b, t, d = h.shape
        # One 2-D [B*T, D] x [D, V] matmul (see matmul2d); HIGHEST so logits stay full float32
        # whatever the backend's default matmul precision (TPU/GPU may otherwise use bf16 passes).
        logits = jnp.matmul(
            context.token_rows(cast(h, self.cfg.dtype)),  # [B*T, D]; context shards kept apart
            cast(w, self.cfg.dtype),
            precision=jax.lax.Precision.HIGHEST,
            preferred_element_type=jnp.float32,
        )
        return context.token_grid(logits, b, t)  # [B,T,V]

    def norm_and_head(self, x):
        """Last block's output [B,T,D] -> (final-normed hidden, float32 logits [B,T,V])."""
        h = self.final_norm(x)
        return h, self.head(h)

    def __call__(
        self,
        tokens,
        positions=None,
        segment_ids=None,
        forced_experts=None,
        with_mtp: bool = True,
    ) -> ModelOutput:
        """tokens [B,T] int32. positions/segment_ids [B,T] (defaults: 0..T-1, one segment).

        forced_experts [n_moe_layers,B,T,k] replays routing. Decoding on the latent cache runs the
        same blocks one layer at a time: model/decode.py `forward_cached_layers`.
        """
        c = self.cfg
        b, t = tokens.shape
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        if segment_ids is None:
            segment_ids = jnp.ones((b, t), jnp.int32)
        x = self.embed_tokens(tokens)
        aux = None
        if c.num_dense_layers:
            x, _ = self.dense_layers(x, positions, segment_ids, None)
        if c.num_moe_layers:
            x, aux = self.moe_layers(x, positions, segment_ids, forced_experts)
        h, logits = self.norm_and_head(x)
        out = ModelOutput(logits=logits, hidden=h)
        if aux is not None:
            ids, counts, balance, dropped = aux
            out = out.replace(expert_ids=ids, expert_counts=counts, balance_loss=jnp.sum(balance))
            if c.moe_capacity_factor > 0:
                out = out.replace(moe_dropped=jnp.sum(dropped))
        if self.mtp and with_mtp:
            out = self._mtp_forward(out, tokens, positions, segment_ids)
        return out

    def _mtp_forward(self, out: ModelOutput, tokens, positions, segment_ids) -> ModelOutput:
        h, logits, counts, balance = out.hidden, [], [], out.balance_loss
        for m, module in enumerate(self.mtp):
            shifted = jnp.pad(
                tokens[:, m + 1 :], ((0, 0), (0, m + 1))
            )  # token t+m+1 at t; tail padded (masked in the loss)
            x, h_head, aux, _ = module(h, self.embed_tokens(shifted), positions, segment_ids)
            logits.append(self.head(h_head))
            h = x
            if aux:
                counts.append(aux[1])
                balance = balance + aux[2]
                if out.moe_dropped is not None:
                    out = out.replace(moe_dropped=out.moe_dropped + aux[3])
        return out.replace(
            mtp_logits=jnp.stack(logits),
            balance_loss=balance,
            mtp_expert_counts=jnp.stack(counts) if counts else None,
        )

    def mtp_step(self, m: int, h_prev, next_tokens, positions, segment_ids, cache=None):
        """One MTP module for drafting: -> (hidden for module m+1, logits [B,T,V], new cache)."""
        x, h_head, _, new_cache = self.mtp[m](
            h_prev, self.embed_tokens(next_tokens), positions, segment_ids, cache
        )
        return x, self.head(h_head), new_cache

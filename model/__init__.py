"""DeepSeek-V3 / Kimi-K2 model in functional Flax: MLA, DeepSeek MoE, MTP, latent-cache decoding,
HF checkpoint interop.

Public API:
    from model import ModelConfig, Transformer, load_hf_checkpoint, save_hf_checkpoint, \\
        count_params, presets
    from model import generate   # the function (model/prompt_batch.py): a prompt list
                                   through model/engine/
"""

from model import presets
from model.config import ModelConfig, RopeScaling, config_from_dict
from model.params import (
    count_params,
    flops_per_token,
    init_params,
    param_logical_specs,
    param_shapes,
    trainable_mask,
    update_router_bias,
)
from model.prompt_batch import generate  # the function; its module is model.prompt_batch
from model.transformer import ModelOutput, Transformer

__all__ = [
    "ModelConfig",
    "RopeScaling",
    "Transformer",
    "ModelOutput",
    "presets",
    "count_params",
    "flops_per_token",
    "init_params",
    "param_logical_specs",
    "param_shapes",
    "trainable_mask",
    "update_router_bias",
    "config_from_dict",
    "load_hf_checkpoint",
    "save_hf_checkpoint",
    "generate",
]


def __getattr__(name):
    # HF interop pulls in safetensors; import it lazily.
    if name in ("load_hf_checkpoint", "save_hf_checkpoint"):
        from model import hf

        return getattr(hf, name)
    raise AttributeError(name)

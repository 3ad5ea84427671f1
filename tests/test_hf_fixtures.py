"""Invariants of the committed HF DeepSeek-V3 fixtures (tests/fixtures/hf/*), checked without torch.

The fixtures are produced by tools/make_hf_fixtures.py; tools/HF_SEMANTICS.md documents the
semantics.
Beyond "files exist", these tests tie each reference.npz to its weights with cheap numpy math
(embedding lookup, final RMSNorm, lm_head, router re-derivation), pin the exact tensor names a
loader must accept, and check the official FP8 block layout with an independent float8_e4m3fn
decoder.
"""

import json
import math
import os

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "fixtures", "hf")
NAMES = ["qlora_group", "noqlora_yarn", "sharded_fp8", "mtp"]
BATCH, SEQ = 2, 12
FP8_BLOCK = 128


# ---------------------------------------------------------------- safetensors without torch


def fp8_e4m3fn_table():
    """All 256 float8_e4m3fn values: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7f/0xff are
    NaN."""
    table = np.zeros(256, np.float64)
    for byte in range(256):
        sign = -1.0 if byte & 0x80 else 1.0
        exp, man = (byte >> 3) & 0xF, byte & 0x7
        if exp == 0xF and man == 0x7:
            table[byte] = np.nan
        elif exp == 0:
            table[byte] = sign * (man / 8.0) * 2.0**-6
        else:
            table[byte] = sign * (1 + man / 8.0) * 2.0 ** (exp - 7)
    return table.astype(np.float32)


FP8_TABLE = fp8_e4m3fn_table()


def decode(dtype, shape, raw):
    if dtype == "F32":
        return np.frombuffer(raw, np.float32).reshape(shape)
    if dtype == "BF16":  # bf16 = upper 16 bits of a float32
        return (
            (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
        )
    if dtype == "F8_E4M3":
        return FP8_TABLE[np.frombuffer(raw, np.uint8)].reshape(shape)
    raise ValueError(f"unexpected safetensors dtype {dtype}")


def read_safetensors(path):
    """{name: (dtype string, float32 array)} for one file."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_len])
    body = data[8 + header_len :]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        out[name] = (meta["dtype"], decode(meta["dtype"], meta["shape"], body[start:end]))
    return out


def load_fixture(name):
    folder = os.path.join(ROOT, name)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    index_path = os.path.join(folder, "model.safetensors.index.json")
    files = (
        sorted(json.load(open(index_path))["weight_map"].values())
        if os.path.exists(index_path)
        else ["model.safetensors"]
    )
    tensors = {}
    for fname in sorted(set(files)):
        tensors.update(read_safetensors(os.path.join(folder, fname)))
    ref = dict(np.load(os.path.join(folder, "reference.npz")))
    return config, tensors, ref


@pytest.fixture(scope="module", params=NAMES)
def fixture(request):
    return (request.param,) + load_fixture(request.param)


# --------------------------------------------------------- expected names (the loader's contract)


def expected_layer_names(cfg, i, moe):
    p = f"model.layers.{i}."
    names = [
        p + n
        for n in (
            "input_layernorm.weight",
            "post_attention_layernorm.weight",
            "self_attn.kv_a_proj_with_mqa.weight",
            "self_attn.kv_a_layernorm.weight",
            "self_attn.kv_b_proj.weight",
            "self_attn.o_proj.weight",
        )
    ]
    if cfg["q_lora_rank"] is None:
        names.append(p + "self_attn.q_proj.weight")
    else:
        names += [
            p + "self_attn." + k
            for k in ("q_a_proj.weight", "q_a_layernorm.weight", "q_b_proj.weight")
        ]
    mlp_prefixes = [p + "mlp."]
    if moe:
        names += [p + "mlp.gate.weight", p + "mlp.gate.e_score_correction_bias"]
        mlp_prefixes = [p + "mlp.shared_experts."] + [
            p + f"mlp.experts.{e}." for e in range(cfg["n_routed_experts"])
        ]
    for mp in mlp_prefixes:
        names += [mp + "gate_proj.weight", mp + "up_proj.weight", mp + "down_proj.weight"]
    return names


def expected_names(cfg):
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    n = cfg["num_hidden_layers"]
    for i in range(n):
        names += expected_layer_names(cfg, i, moe=i >= cfg["first_k_dense_replace"])
    for i in range(n, n + cfg.get("num_nextn_predict_layers", 0)):  # official MTP module names
        names += expected_layer_names(cfg, i, moe=True)
        names += [
            f"model.layers.{i}.{k}"
            for k in (
                "enorm.weight",
                "hnorm.weight",
                "eh_proj.weight",
                "shared_head.norm.weight",
                "shared_head.head.weight",
                "embed_tokens.weight",
            )
        ]
    return set(names)


def test_tensor_names_and_shapes(fixture):
    name, cfg, tensors, _ = fixture
    weights = {k for k in tensors if not k.endswith("_scale_inv")}
    assert weights == expected_names(cfg), f"{name}: {sorted(weights ^ expected_names(cfg))[:6]}"
    d, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    qk = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]
    shape = lambda k: tensors[k][1].shape
    kv_a_rows = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]  # latent + shared rope key
    assert shape("model.layers.0.self_attn.kv_a_proj_with_mqa.weight") == (kv_a_rows, d)
    assert shape("model.layers.0.self_attn.kv_b_proj.weight") == (
        heads * (cfg["qk_nope_head_dim"] + cfg["v_head_dim"]),
        cfg["kv_lora_rank"],
    )
    assert shape("model.layers.0.self_attn.o_proj.weight") == (d, heads * cfg["v_head_dim"])
    q_out = "q_proj" if cfg["q_lora_rank"] is None else "q_b_proj"
    assert shape(f"model.layers.0.self_attn.{q_out}.weight")[0] == heads * qk
    moe = f"model.layers.{cfg['first_k_dense_replace']}.mlp."
    assert shape(moe + "gate.weight") == (cfg["n_routed_experts"], d)
    assert shape(moe + "shared_experts.gate_proj.weight") == (
        cfg["moe_intermediate_size"] * cfg["n_shared_experts"],
        d,
    )
    assert shape(moe + "experts.0.down_proj.weight") == (d, cfg["moe_intermediate_size"])


# ---------------------------------------------------------------- config styles and shards


def test_config_styles():
    v5 = json.load(open(os.path.join(ROOT, "noqlora_yarn", "config.json")))
    assert (
        "rope_scaling" not in v5 and "rope_theta" not in v5
    )  # save_pretrained (transformers v5) style
    assert (
        v5["rope_parameters"]["rope_type"] == "yarn"
        and v5["rope_parameters"]["rope_theta"] == 50000.0
    )
    ckpt = json.load(open(os.path.join(ROOT, "sharded_fp8", "config.json")))
    assert (
        "rope_parameters" not in ckpt and ckpt["rope_theta"] == 10000.0
    )  # official checkpoint style
    assert (
        ckpt["rope_scaling"]["type"] == "yarn"
        and ckpt["rope_scaling"]["original_max_position_embeddings"] == 4096
    )
    assert ckpt["quantization_config"] == {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    }


def test_index_covers_all_shards():
    folder = os.path.join(ROOT, "sharded_fp8")
    index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    shards = sorted(f for f in os.listdir(folder) if f.endswith(".safetensors"))
    assert len(shards) >= 2 and sorted(set(index["weight_map"].values())) == shards
    total = 0
    for shard in shards:
        contents = read_safetensors(os.path.join(folder, shard))
        assert {k for k, v in index["weight_map"].items() if v == shard} == set(contents)
        total += sum(
            a.size * {"F32": 4, "BF16": 2, "F8_E4M3": 1}[dt] for dt, a in contents.values()
        )
    assert index["metadata"]["total_size"] == total
    # At least one weight and its scale live in different shards: loaders must go through the index.
    wm = index["weight_map"]
    assert any(wm[k] != wm[k + "_scale_inv"] for k in wm if k + "_scale_inv" in wm)


def test_fp8_blocks():
    _, tensors, _ = load_fixture("sharded_fp8")[:3]
    fp8 = [k for k, (dt, _) in tensors.items() if dt == "F8_E4M3"]
    assert len(fp8) > 20
    multi_block = 0
    for k in fp8:
        q = tensors[k][1]
        dt, scale = tensors[k + "_scale_inv"]
        assert dt == "F32" and scale.shape == (
            math.ceil(q.shape[0] / FP8_BLOCK),
            math.ceil(q.shape[1] / FP8_BLOCK),
        )
        assert (scale > 0).all() and np.isfinite(q).all()
        multi_block += scale.size > 1
        # Each block's absmax was mapped onto 448 (largest finite e4m3fn): the quantizer used that
        # block's scale.
        for i in range(scale.shape[0]):
            for j in range(scale.shape[1]):
                blk = q[i * FP8_BLOCK : (i + 1) * FP8_BLOCK, j * FP8_BLOCK : (j + 1) * FP8_BLOCK]
                assert np.abs(blk).max() == 448.0, (k, i, j)
    assert multi_block >= 5
    others = {
        k: dt for k, (dt, _) in tensors.items() if k not in fp8 and not k.endswith("_scale_inv")
    }
    assert {dt for k, dt in others.items() if "e_score_correction_bias" not in k} == {"BF16"}
    assert all(dt == "F32" for k, dt in others.items() if "e_score_correction_bias" in k)
    assert all(
        k.startswith("model.layers.") and k.endswith(("_proj.weight", "_mqa.weight")) for k in fp8
    )
    assert not any(".mlp.gate.weight" in k for k in fp8)  # the router stays bf16


# ---------------------------------------------------------------- reference vs weights


def rmsnorm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def test_reference_shapes_and_peakedness(fixture):
    name, cfg, _, ref = fixture
    v, d, n_layers = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    assert ref["input_ids"].shape == (BATCH, SEQ) and ref["logits"].shape == (BATCH, SEQ, v)
    assert ref["hidden_states"].shape == (n_layers + 1, BATCH, SEQ, d)
    assert ref["logits"].dtype == np.float32 and np.isfinite(ref["logits"]).all()
    logits = ref["logits"].astype(np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    assert probs.max(-1).mean() > 0.2, name
    assert logits.std(-1).mean() > 1.0, name
    assert len(np.unique(ref["input_ids"])) >= 15  # varied ids, including repeats in row 1


def test_reference_consistent_with_weights(fixture):
    name, cfg, tensors, ref = fixture
    embed = tensors["model.embed_tokens.weight"][1]
    np.testing.assert_array_equal(ref["hidden_states"][0], embed[ref["input_ids"]])
    normed = rmsnorm(ref["hidden_states"][-1], tensors["model.norm.weight"][1], cfg["rms_norm_eps"])
    np.testing.assert_allclose(ref["final_hidden"], normed, atol=1e-5)
    logits = ref["final_hidden"].astype(np.float64) @ tensors["lm_head.weight"][1].T.astype(
        np.float64
    )
    np.testing.assert_allclose(ref["logits"], logits, atol=1e-4)


def group_limited_topk(router_logits, bias, cfg):
    """DeepseekV3TopkRouter choice (see tools/HF_SEMANTICS.md) in numpy: sorted expert ids per
    token."""
    scores = 1 / (1 + np.exp(-router_logits.astype(np.float64))) + bias
    n_tok, n_exp = scores.shape
    g = cfg["n_group"]
    group_scores = np.sort(scores.reshape(n_tok, g, n_exp // g), -1)[..., -2:].sum(-1)
    keep = np.argsort(-group_scores, -1)[:, : cfg["topk_group"]]
    mask = np.zeros((n_tok, g), bool)
    np.put_along_axis(mask, keep, True, -1)
    masked = np.where(np.repeat(mask, n_exp // g, -1), scores, -np.inf)
    return np.sort(np.argsort(-masked, -1)[:, : cfg["num_experts_per_tok"]], -1)


def routing_blocks(cfg, ref):
    """(prefix, decoder-layer indices) of every set of router outputs stored in the reference."""
    blocks = [("", [int(i) for i in ref["moe_layer_ids"]], BATCH * SEQ)]
    if "mtp_expert_ids_sorted" in ref:  # MTP runs on the T-1 positions that have a next token
        blocks.append(("mtp_", [cfg["num_hidden_layers"]], BATCH * (SEQ - 1)))
    return blocks


def test_routing_reference(fixture):
    name, cfg, tensors, ref = fixture
    k, rsf = cfg["num_experts_per_tok"], cfg["routed_scaling_factor"]
    for prefix, layers, n_tokens in routing_blocks(cfg, ref):
        ids_sorted, ids_raw = ref[prefix + "expert_ids_sorted"], ref[prefix + "expert_ids_raw"]
        assert ids_sorted.shape == (len(layers), n_tokens, k)
        np.testing.assert_array_equal(ids_sorted, np.sort(ids_raw, -1))
        assert (ref[prefix + "routing_margin"] > 1e-3).all()
        for m, layer in enumerate(layers):
            bias = tensors[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"][1]
            assert np.abs(bias).max() > 0.05, "bias must be nonzero to matter"
            np.testing.assert_array_equal(
                group_limited_topk(ref[prefix + "router_logits"][m], bias, cfg),
                ids_sorted[m],
                err_msg=f"{name} layer {layer}",
            )
            # Weights come from the UNBIASED sigmoid scores of the chosen experts.
            chosen = np.take_along_axis(ref[prefix + "router_logits"][m], ids_raw[m], -1).astype(
                np.float64
            )
            w = 1 / (1 + np.exp(-chosen))
            if cfg["norm_topk_prob"]:
                w = w / (w.sum(-1, keepdims=True) + 1e-20)
            np.testing.assert_allclose(ref[prefix + "router_weights_raw"][m], w * rsf, rtol=1e-5)
        distinct = [len({tuple(t) for t in layer_ids}) for layer_ids in ids_sorted]
        assert min(distinct) >= 6, (name, distinct)
    assert ref["unbiased_differs"].any(), f"{name}: bias never changed a routing decision"


def test_mtp_fixture():
    cfg, tensors, ref = load_fixture("mtp")
    n = cfg["num_hidden_layers"]
    assert cfg["num_nextn_predict_layers"] == 1
    np.testing.assert_array_equal(
        tensors[f"model.layers.{n}.embed_tokens.weight"][1], tensors["model.embed_tokens.weight"][1]
    )
    np.testing.assert_array_equal(
        tensors[f"model.layers.{n}.shared_head.head.weight"][1], tensors["lm_head.weight"][1]
    )
    assert tensors[f"model.layers.{n}.eh_proj.weight"][1].shape == (
        cfg["hidden_size"],
        2 * cfg["hidden_size"],
    )
    assert ref["mtp_logits"].shape == (BATCH, SEQ - 1, cfg["vocab_size"])
    # mtp_hidden is shared_head.norm's output: dividing out its weight leaves unit RMS per token.
    w = tensors[f"model.layers.{n}.shared_head.norm.weight"][1]
    assert not np.allclose(w, 1.0)
    rms = np.sqrt(((ref["mtp_hidden"].astype(np.float64) / w) ** 2).mean(-1))
    np.testing.assert_allclose(rms, 1.0, atol=1e-4)
    logits = ref["mtp_hidden"].astype(np.float64) @ tensors["lm_head.weight"][1].T.astype(
        np.float64
    )
    np.testing.assert_allclose(ref["mtp_logits"], logits, atol=1e-4)
    assert ref["mtp_logits"].std(-1).mean() > 1.0


def test_total_size_small():
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(ROOT) for f in fs)
    assert total < 3_000_000


# ----------------------------------------------- numpy forward, written from tools/HF_SEMANTICS.md
# An independent float64 re-implementation of the documented semantics (MLA with interleaved rope,
# YaRN, router, MTP) must reproduce HF's float32 logits. This validates HF_SEMANTICS.md and the
# fixture weights together.
# Letters: B batch, T tokens, D model, H heads, n nope dim, r rope dim, v value dim, L kv latent
# rank.


def silu(x):
    return x / (1 + np.exp(-x))


def yarn_mscale(factor, m):
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


def rope_setup(cfg):
    """(inv_freq [r/2], attention_factor for cos/sin, softmax scale) from either config style."""
    r = cfg["qk_rope_head_dim"]
    rp = cfg.get("rope_parameters") or dict(
        cfg.get("rope_scaling") or {}, rope_theta=cfg["rope_theta"]
    )
    theta = rp["rope_theta"]
    inv_freq = theta ** (-np.arange(0, r, 2) / r)
    attention_factor, scale = 1.0, (cfg["qk_nope_head_dim"] + r) ** -0.5
    if rp.get("rope_type", rp.get("type")) == "yarn":
        factor, orig = rp["factor"], rp["original_max_position_embeddings"]
        corr = lambda rot: r * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))
        low = max(math.floor(corr(rp.get("beta_fast") or 32)), 0)
        high = min(math.ceil(corr(rp.get("beta_slow") or 1)), r - 1)
        ramp = np.clip((np.arange(r // 2) - low) / max(high - low, 0.001), 0, 1)
        inv_freq = inv_freq / factor * ramp + inv_freq * (1 - ramp)
        m, m_all = rp.get("mscale"), rp.get("mscale_all_dim")
        attention_factor = (
            yarn_mscale(factor, m) / yarn_mscale(factor, m_all)
            if m and m_all
            else yarn_mscale(factor, 1)
        )
        if m_all:
            scale *= yarn_mscale(factor, m_all) ** 2
    return inv_freq, attention_factor, scale


def rope_interleaved(x, pos, inv_freq, attention_factor):
    """Pairs (x[2j], x[2j+1]) rotate by pos*inv_freq[j]; output de-interleaved like HF (same for q
    and k)."""
    angle = pos[:, None] * inv_freq[None]  # [T, r/2]
    cos, sin = np.cos(angle) * attention_factor, np.sin(angle) * attention_factor
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def mla(W, p, cfg, x, pos):
    H, n, r, v, L = (
        cfg[k]
        for k in (
            "num_attention_heads",
            "qk_nope_head_dim",
            "qk_rope_head_dim",
            "v_head_dim",
            "kv_lora_rank",
        )
    )
    B, T, _ = x.shape
    inv_freq, attention_factor, scale = rope_setup(cfg)
    if cfg["q_lora_rank"] is None:
        q = x @ W[p + "q_proj.weight"].T
    else:  # q_a_layernorm / kv_a_layernorm always use eps 1e-6
        q = (
            rmsnorm(x @ W[p + "q_a_proj.weight"].T, W[p + "q_a_layernorm.weight"], 1e-6)
            @ W[p + "q_b_proj.weight"].T
        )
    q = q.reshape(B, T, H, n + r).transpose(0, 2, 1, 3)  # [B, H, T, n+r]
    ckv = x @ W[p + "kv_a_proj_with_mqa.weight"].T  # [B, T, L + r]
    latent, k_pe = rmsnorm(ckv[..., :L], W[p + "kv_a_layernorm.weight"], 1e-6), ckv[..., L:]
    kv = (
        (latent @ W[p + "kv_b_proj.weight"].T).reshape(B, T, H, n + v).transpose(0, 2, 1, 3)
    )  # [B, H, T, n+v]
    q_pe = rope_interleaved(q[..., n:], pos, inv_freq, attention_factor)
    k_pe = rope_interleaved(
        k_pe[:, None], pos, inv_freq, attention_factor
    )  # one head, shared by all
    s = (q[..., :n] @ kv[..., :n].transpose(0, 1, 3, 2) + q_pe @ k_pe.transpose(0, 1, 3, 2)) * scale
    s = s + np.triu(np.full((T, T), -np.inf), 1)
    prob = np.exp(s - s.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    out = (prob @ kv[..., n:]).transpose(0, 2, 1, 3).reshape(B, T, H * v)
    return out @ W[p + "o_proj.weight"].T


def swiglu(W, p, x):
    return (silu(x @ W[p + "gate_proj.weight"].T) * (x @ W[p + "up_proj.weight"].T)) @ W[
        p + "down_proj.weight"
    ].T


def moe(W, p, cfg, x):
    flat = x.reshape(-1, x.shape[-1])
    logits = flat @ W[p + "gate.weight"].T
    ids = group_limited_topk(logits, W[p + "gate.e_score_correction_bias"], cfg)
    w = np.take_along_axis(1 / (1 + np.exp(-logits)), ids, -1)  # unbiased scores
    if cfg["norm_topk_prob"]:
        w = w / (w.sum(-1, keepdims=True) + 1e-20)
    w = w * cfg["routed_scaling_factor"]
    out = np.zeros_like(flat)
    for e in np.unique(ids):
        tok, slot = np.nonzero(ids == e)
        out[tok] += w[tok, slot, None] * swiglu(W, p + f"experts.{e}.", flat[tok])
    return out.reshape(x.shape) + swiglu(W, p + "shared_experts.", x)


def decoder_layer(W, i, cfg, h, pos):
    p, eps = f"model.layers.{i}.", cfg["rms_norm_eps"]
    h = h + mla(W, p + "self_attn.", cfg, rmsnorm(h, W[p + "input_layernorm.weight"], eps), pos)
    x = rmsnorm(h, W[p + "post_attention_layernorm.weight"], eps)
    dense = i < cfg["first_k_dense_replace"]  # MTP blocks (i >= num_hidden_layers) are always MoE
    return h + (swiglu(W, p + "mlp.", x) if dense else moe(W, p + "mlp.", cfg, x))


def float64_weights(tensors):
    """Decoded tensors as float64, FP8 ones dequantized: W[i, j] = Wq[i, j] * scale_inv[i // 128, j
    // 128]."""
    W = {k: a.astype(np.float64) for k, (_, a) in tensors.items() if not k.endswith("_scale_inv")}
    for k, (_, scale) in tensors.items():
        if k.endswith("_scale_inv"):
            q = W[k[: -len("_scale_inv")]]
            W[k[: -len("_scale_inv")]] = (
                q
                * np.repeat(np.repeat(scale, FP8_BLOCK, 0), FP8_BLOCK, 1)[
                    : q.shape[0], : q.shape[1]
                ]
            )
    return W


def test_numpy_forward_matches_reference(fixture):
    name, cfg, tensors, ref = fixture
    W, eps, ids = float64_weights(tensors), cfg["rms_norm_eps"], ref["input_ids"]
    pos = np.arange(SEQ, dtype=np.float64)
    h = W["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        h = decoder_layer(W, i, cfg, h, pos)
        np.testing.assert_allclose(
            h, ref["hidden_states"][i + 1], atol=1e-4, err_msg=f"{name} layer {i}"
        )
    final = rmsnorm(h, W["model.norm.weight"], eps)
    np.testing.assert_allclose(
        final @ W["lm_head.weight"].T, ref["logits"], atol=1e-4, err_msg=name
    )
    if (
        "mtp_logits" in ref
    ):  # x_i = eh_proj([enorm(embed(t_{i+1})), hnorm(final_hidden_i)]), positions 1..T-1
        p = f"model.layers.{cfg['num_hidden_layers']}."
        e = rmsnorm(W[p + "embed_tokens.weight"][ids[:, 1:]], W[p + "enorm.weight"], eps)
        x = (
            np.concatenate([e, rmsnorm(final[:, :-1], W[p + "hnorm.weight"], eps)], -1)
            @ W[p + "eh_proj.weight"].T
        )
        y = decoder_layer(W, cfg["num_hidden_layers"], cfg, x, pos[1:])
        y = rmsnorm(y, W[p + "shared_head.norm.weight"], eps)
        np.testing.assert_allclose(
            y @ W[p + "shared_head.head.weight"].T, ref["mtp_logits"], atol=1e-4
        )

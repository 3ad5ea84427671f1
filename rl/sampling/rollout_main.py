"""`python main.py --mode=rollout`: plays episodes on the engine, writes records + a summary
(configs/rollout.py documents the flags and outputs)."""

from __future__ import annotations

import json
import os

import jax


def _model(config, params_dir: str, cache_len: int):
    from model import init_params, presets
    from model.errors import InputError
    from model.export import load_params

    decode_dtype = config.decode_dtype  # the engine's params + cache dtype
    if params_dir:
        try:
            cfg, params = load_params(params_dir)
        except (FileNotFoundError, ValueError) as e:  # a params dir that is not an export
            raise InputError(f"--params={params_dir}: {' '.join(str(e).split())}") from None
        return cfg.replace(decode_dtype=decode_dtype), params
    cfg = presets.get(config.model, max_position_embeddings=cache_len, decode_dtype=decode_dtype)
    return cfg, init_params(cfg, jax.random.PRNGKey(0))  # random init: smoke test


def run_rollouts(config, workdir: str, params_dir: str = "") -> dict:
    from data.export_tokenizer import tokenizer_for_export
    from data.tokenizers import ByteTokenizer
    from model.engine_config import EngineConfig, build_engine
    from model.errors import InputError
    from rl.envs import OraclePolicy, generate_tasks, load_tasks, require_isolation
    from rl.envs.grading.tasks import require_test_deps
    from rl.episodes.records import to_json
    from rl.episodes.rewards import reward_config_from_dict
    from rl.sampling.rollout import play_episodes

    # Episodes run model-written code: refuse before loading anything unless bubblewrap works or
    # the caller opted in (RL_ENVS_ALLOW_UNISOLATED=1; see rl/envs/isolation/sandbox.py).
    require_isolation()
    if "rl" not in config:
        from model.errors import ConfigError

        raise ConfigError(
            "--mode=rollout needs --config=configs/rollout.py (this config has no rl section)"
        )
    r = config.rl
    cfg, params = _model(config, params_dir, r.cache_len)
    # the export's own tokenizer (a random-init smoke run: bytes)
    try:
        tok = (
            tokenizer_for_export(params_dir, "", cfg.vocab_size) if params_dir else ByteTokenizer()
        )
    except ValueError as e:  # an unreadable record, or more ids than the model has
        raise InputError(f"--params={params_dir}: {e}") from None
    tasks = load_tasks(r.tasks) if r.tasks else generate_tasks(r.n_tasks, seed=r.task_seed)
    require_test_deps(tasks)  # declared test dependencies in this machine's cache, or one line
    ec = EngineConfig.from_block(r, cfg)  # the block's decode keys (configs/engine_block.py)
    engine = build_engine(
        cfg, params, ec, valid_vocab=tok.vocab_size, params_version=r.params_version
    )
    os.makedirs(workdir, exist_ok=True)
    records_path = os.path.join(workdir, "rollouts.jsonl")
    with open(records_path, "w") as f:
        out = play_episodes(
            engine,
            tok,
            tasks,
            group_size=r.group_size,
            max_turn_tokens=r.max_turn_tokens,
            workers=r.workers,
            env_kwargs=dict(max_turns=r.max_turns, obs_token_budget=r.obs_token_budget),
            scripted=(lambda task: OraclePolicy(tok, task)) if r.scripted else None,
            on_record=lambda rec: f.write(json.dumps(to_json(rec)) + "\n"),
            log_every_s=r.log_every_s,
            reward=reward_config_from_dict(r.reward.to_dict()),
        )
    summary = out.summary()
    summary.update(records=records_path, error_messages=out.stats["error_messages"])
    with open(os.path.join(workdir, "rollout_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    return summary

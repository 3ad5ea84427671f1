"""Rollouts: play coding-task episodes with a model on the engine, write token-exact records.

    python main.py --mode=rollout --config=configs/rollout.py --workdir=workdir/rollout \\
        --params=workdir/sft/export/params_60            # exported params (model.export)
    python main.py --mode=rollout --config=configs/rollout.py --workdir=/tmp/ro     # smoke test:
        # random-init 'tiny' model (max_position_embeddings raised to cache_len)
    python main.py --mode=rollout --config=configs/rollout.py --config.rl.scripted=True ...
        # the oracle's turns teacher-forced through the same engine (pass rate 1.0)

Writes <workdir>/rollouts.jsonl (one record per line, rl/episodes/records.py:
rl.episodes.records.from_json reads one back) and <workdir>/rollout_summary.json (reward/mean and
its parts under rl.reward, as configs/rl.py's, pass rate, mean tokens, malformed-call rate,
tokens/s, where the wall time went), printing a progress line every rl.log_every_s seconds.
Expect (smoke test, tiny random model, 8 tasks x 2): pass rate 0, most turns malformed (random
ids include control tokens), every record token-exact; a scripted run passes every task.
"""

import ml_collections

from configs import engine_block


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.model = "tiny"  # preset for a random-init smoke run (ignored with --params)
    # The engine's params + latent cache dtype: 'auto' = bfloat16 on GPU/TPU, float32 on CPU
    # (ModelConfig.decode_dtype)
    c.decode_dtype = "auto"
    c.rl = ml_collections.ConfigDict(
        dict(
            # the engine (configs/engine_block.py): concurrent episodes, per-episode context
            # (prompt + turns + observations), smallest prefill bucket (compiled programs:
            # model/engine.py)
            **engine_block.decode(cache_len=2048, min_bucket=64),
            tasks="",  # tasks.jsonl (rl/envs/grading/tasks.py); '' = generate n_tasks procedurally
            n_tasks=8,
            task_seed=0,
            group_size=2,  # G episodes per task (group-relative advantages)
            max_turn_tokens=256,
            max_turns=10,
            obs_token_budget=512,
            workers=4,  # sandbox threads
            params_version=0,
            scripted=False,  # teacher-force the oracle's turns (rl/envs/agent/scripted.py)
            log_every_s=10.0,
        )
    )
    # The reward each record carries (rl/episodes/rewards.py; the same block as configs/rl.py's
    # rl.reward)
    c.rl.reward = ml_collections.ConfigDict(dict(outcome="all_pass", malformed_penalty=0.5))
    return c

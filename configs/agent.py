"""The agent command: one episode on your own repository in RL's harness (rl/serve/agent.py).

    python main.py --mode=agent --params=workdir/sft/export/params_60 --repo=path/to/project \\
        "the parser drops the last field"                      # prints the change as a diff
    python main.py --mode=agent --endpoint=http://127.0.0.1:8000/v1 --repo=... "..." --apply
    python main.py --mode=agent --scripted=calls.json --repo=... "..."   # scripted turns (tests)

The episode's tools, system prompt, tool-output trim and sandbox are RL's (rl/envs); this block
sizes it. It is the config --mode=agent uses when --config has no `agent` block. Expect from an
untrained or tiny model: a turn that is not a tool call ends the episode with no change; the
episode is logged either way under <workdir>/interactions (the server's interaction log), with
--apply / --reject as the user's feedback.
"""

import ml_collections

from configs import engine_block


def get_config() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.model = "tiny"  # read only by the engine's random-init fallback (--params is required)
    # The engine's params + latent cache dtype: 'auto' = bfloat16 on GPU/TPU, float32 on CPU
    c.decode_dtype = "auto"
    c.agent = ml_collections.ConfigDict(
        dict(
            # The engine (configs/engine_block.py) for --params: one episode, greedy turns.
            # 8,192 tokens: the suite's scripted episodes measure 5,746 p50 / 6,453 p90 / 7,526
            # max with outputs trimmed to 2,048 (bench/measure_repo_lengths.py, byte tokenizer).
            **engine_block.decode(slots=1, cache_len=8192, min_bucket=64, temperature=0.0),
            max_tokens=8192,  # the episode's context (<= cache_len)
            max_turn_tokens=512,  # one policy turn
            max_turns=30,
            obs_token_budget=2048,  # each tool output trimmed to this (data/chat.py)
            command_timeout_s=10.0,
            test_timeout_s=60.0,
            test_command="python3 -m pytest -q",  # the run_tests tool
            max_repo_bytes=1 << 30,  # the sandbox's copy limit (Limits.repo_bytes)
            # data.tokenizers.load_tokenizer spec (RL's); '' = the one the --params export
            # records (data/export_tokenizer.py), bytes when it records none or without --params
            tokenizer="",
            model_name="composer",  # the model an --endpoint request names
            log_dir="",  # '' = <workdir>/interactions, where --mode=serve logs
        )
    )
    return c

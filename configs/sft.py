"""Stage (c): SFT on agent coding traces (data/traces/coding_traces.jsonl, 25% of rows from the
self-summarization traces, data/traces/summary_traces.jsonl, 10% from the search-tool traces,
data/traces/tool_traces.jsonl, and 15% from the scripted expert's real-repository traces,
data/traces/repo_expert_traces.jsonl), from stage (b)'s export.

The same loop and TrainState; only the data differ (chat rows whose loss_mask keeps assistant
tokens only). The model keeps stage (b)'s long-context YaRN settings (2048 tokens, factor 16 from
128), so the exported checkpoint plays the agentic eval (its prompt is ~630-700 tokens), and 73% of
the coding traces (1.3k-3.2k tokens) and 23% of the summary traces' segments fit a row whole.

    python main.py --config=configs/pretrain.py --workdir=workdir/pretrain          # stage (a)
    python main.py --mode=convert --config=configs/pretrain.py --workdir=workdir/pretrain
    python main.py --config=configs/long_context.py --workdir=workdir/long \\
        --config.init_params_from=workdir/pretrain/export/params_40                # stage (b)
    python main.py --mode=convert --config=configs/long_context.py --workdir=workdir/long
    python main.py --mode=sft --config=configs/sft.py --workdir=workdir/sft \\
        --config.init_params_from=workdir/long/export/params_30                    # stage (c)

Expect: held-out NLL and bits/byte on held-out traces (assistant tokens only) printed before the
first step and every 20 steps, going down over 60 steps of 2 x 2048-token rows (the same 4,096
tokens per step as the earlier 8 x 512). Measured after the README's stages (a) and (b), small
preset, 1,218 s on 2 shared CPU cores: NLL 4.075 -> 2.096, bits/byte 6.043 -> 3.109
(bench/RESULTS_LOG.md, section "Evaluation (eval/)"; measured before the summary traces joined the
mix). Without --config.init_params_from it starts from a
random init (a smoke test).
"""

from configs import long_context, pretrain

# Share of packed rows from the self-summarization traces (data/traces/summary_traces.jsonl: one
# trace per segment of long_lookup chains, each non-final one ending in its trained summary turn):
# ~their share of the two files' tokens (257k of 848k = 0.30), rounded down so the summary format
# does not crowd out the 12 coding families. Their segments (1.4k-2.7k tokens, played at a 2,560
# token context) are longer than this stage's 2,048-token row in 92 of 120 cases: those are split,
# and the piece holding the summary turn then lacks the start of its segment (open: issue 33).
SUMMARY_WEIGHT = 0.25
# Share of packed rows from the tool traces (data/traces/tool_traces.jsonl, `python -m
# rl.envs.traces --tools`: the training, review and DevOps families with the search tools on, so the
# policy learns to search before it opens files and to report review findings): ~their share of
# the three files' tokens (98k of 946k = 0.10).
TOOL_WEIGHT = 0.1
# Share of packed rows from the scripted expert's traces on mined real-repository tasks
# (data/traces/repo_expert_traces.jsonl, `python -m rl.envs.repo_traces`: training repositories
# only; run the tests, search, read the function by line range, edit, rerun, submit; some with a
# mistake and its recovery). 0.15: the real-repository tool flow is what RL on mined tasks needs
# (issue 52), taken from the coding traces' share; its episodes (~3-6k byte tokens) are longer
# than this stage's 2,048-token rows and are split like the summary segments.
REPO_EXPERT_WEIGHT = 0.15


def get_config():
    c = pretrain.get_config()
    c.model_overrides = long_context.long_context_overrides()
    c.train.update(
        steps=60,
        batch_size=2,
        seq_len=long_context.LONG_CONTEXT,
        lr=1e-3,
        warmup_steps=5,
        eval_every=20,
        log_every=5,
        mtp_mode="distill",
    )  # MTP heads trained by self-distillation from the main head
    c.data.update(
        sources=(
            {
                "kind": "jsonl",
                "paths": ["data/traces/coding_traces.jsonl"],
                "field": "messages",
                "name": "traces",
                "weight": 1.0 - SUMMARY_WEIGHT - TOOL_WEIGHT - REPO_EXPERT_WEIGHT,
            },
            {
                "kind": "jsonl",
                "paths": ["data/traces/summary_traces.jsonl"],
                "field": "messages",
                "name": "summary_traces",
                "weight": SUMMARY_WEIGHT,
            },
            {
                "kind": "jsonl",
                "paths": ["data/traces/tool_traces.jsonl"],
                "field": "messages",
                "name": "tool_traces",
                "weight": TOOL_WEIGHT,
            },
            {
                "kind": "jsonl",
                "paths": ["data/traces/repo_expert_traces.jsonl"],
                "field": "messages",
                "name": "repo_expert_traces",
                "weight": REPO_EXPERT_WEIGHT,
            },
        ),
        avoid_splitting=True,
        heldout_fraction=0.05,
        # The environment's trim at CodingEnv's default obs_token_budget, which played the traces:
        # an observation already trimmed by it is unchanged, a longer one is cut the same way.
        tool_output_budget=2048,
    )
    c.checkpoint.every_steps = 20
    return c

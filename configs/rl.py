"""Asynchronous on-policy RL (Composer-2-style GRPO): samplers + trainer sharing a weight store and
a rollout store under the workdir.

    python main.py --mode=rl --config=configs/rl.py --workdir=/tmp/rl
    python main.py --mode=rl --config=configs/rl.py --workdir=/tmp/rl \\
        --config.rl.samplers=2 --config.rl.mode=processes --config.train.lr=3e-3
    XLA_FLAGS=--xla_force_host_platform_device_count=4 python main.py --mode=rl \\
        --config=configs/rl.py --config.mesh.data=1 --config.mesh.fsdp=4 --workdir=/tmp/rl4
    python main.py --mode=rl --config=configs/rl.py --workdir=/tmp/rl \\
        --config.init_params_from=workdir/sft/export/params_60      # from an exported stage

The trainer is pretraining's (train/trainer.py) with this file's `train` values: its mesh
(`mesh`, `rules`), optimizer (`train.optimizer`, `train.lr`, schedule, clipping), checkpoints
(`checkpoint.every_steps`), `train.steps` (0: until the pool is used up), `train.max_seconds`
(no step starts after it) and multi-host flags (--coordinator_address/--num_processes/
--process_id). `train.batch_size` and `train.seq_len` follow rl.groups_per_batch x rl.group_size
and rl.max_tokens.
Start: `model` is a preset name or an HF folder; `init_params_from` (exported params) wins.
Task: 'pattern' is the toy task of tests/test_rl_loop.py (reward = fraction of completion tokens
with id < pattern_size; ~pattern_size/vocab at random init). 'coding' plays multi-turn CodingEnv
episodes in the sandbox (rl/sampling/coding_sampler.py on rl/sampling/rollout.py's driver,
data.tokenizer's ids) on a pool of `pool_size` generated tasks (training templates only, seeded by
rl.seed); the reward is rl/episodes/rewards.py under rl.reward on the hidden tests' grade and the
episode's counts, carried by each record and logged (progress lines, TensorBoard) as reward/mean and
per part: reward/outcome, reward/malformed, reward/len_<quantity> for each length term under
rl.reward. It refuses to start without bubblewrap isolation (opt in to rlimits only with
RL_ENVS_ALLOW_UNISOLATED=1).
rl.max_tokens is then the episode's whole context budget (engine cache, CodingEnv max_tokens and
training row length; a generated task's prompt is ~650 tokens), rl.valid_vocab is set to the
tokenizer's, and the `rl.coding` block sizes episodes:

    python main.py --mode=rl --config=configs/rl.py --workdir=/tmp/rl_coding \
        --config.rl.task=coding --config.rl.pool_size=4 --config.rl.group_size=2 \
        --config.rl.groups_per_batch=2 --config.rl.groups_per_call=2 --config.rl.max_tokens=768

With self-summarization (rl/envs/agent/summary.py) on the long-context family, each episode a chain
of up to max_segments segments, one training row each (rl.segments_per_chain = max_segments):

    python main.py --mode=rl --config=configs/rl.py --workdir=/tmp/rl_summary \\
        --config.rl.task=coding --config.rl.coding.templates="('long_lookup',)" \\
        --config.rl.coding.summary.trigger_tokens=1000 --config.rl.coding.summary.max_segments=2 \\
        --config.rl.segments_per_chain=2 --config.rl.max_tokens=1792 --config.rl.pool_size=2 \\
        --config.rl.group_size=2 --config.rl.groups_per_batch=1 --config.rl.groups_per_call=2 \\
        --config.rl.coding.difficulties="(1,)" --config.rl.coding.max_turn_tokens=48

(2 steps, 2026-11-27; a random-init policy answers the summarize instruction with anything but a
summary, so its chains end `no_summary` after one segment: tests/test_rl_coding.py forces the
oracle's summaries to train two-segment chains.)

Backpressure: a sampler writes a play call only while the groups the trainer has not settled
plus the call's stay within rl.max_ahead (>= groups_per_batch + groups_per_call - 1, checked).
With rl.speculative_k > 0 the loss distills the MTP heads toward the policy (rl.mtp_weight) and
the logs carry spec/acceptance and spec/tokens_per_verify; every run writes
<workdir>/timeline.json (rl/episodes/timeline.py: spans per process and thread) and idle/* scalars.

Expect (tiny preset, threads, 1 sampler, pool 256 = 64 steps of 4 groups x 8; measured
2026-11-27 with the 4-device command above, 2 CPU cores at load ~5): mean reward 0.109 at step 1,
0.969 at 50, 0.984 at 64, step times 174-260 ms after compilation (bench/RESULTS_LOG.md, "RL on the
one trainer and on a mesh"). Re-running the same command resumes from the latest checkpoint; a
finished pool (single epoch) stops at once.
"""

import ml_collections

from configs import default, engine_block


def get_config() -> ml_collections.ConfigDict:
    # Pretraining's train / mesh / rules / checkpoint sections with RL's values: the same trainer
    # (optimizer roles, schedule, clipping, non-finite guard, SIGTERM save, MFU lines) and the same
    # sharding (`--config.mesh.fsdp=4` shards the RL trainer as it shards pretraining).
    c = default.get_config()
    c.model = "tiny"  # preset name or HF folder
    c.init_params_from = ""  # exported params dir (model.export layout); '' = model
    c.rl = ml_collections.ConfigDict(
        dict(
            task="pattern",  # 'pattern' (toy) | 'summary_toy' | 'coding': rl/sampling/rl_tasks.py
            pattern_size=32,  # toy task: target ids [0, pattern_size)
            # Training rows per episode: an episode that summarizes is a chain of segments, one
            # row each (rl/episodes/records.py); train.batch_size = groups x group_size x this
            segments_per_chain=1,
            pool_size=256,  # tasks in the pool (one group each: single epoch)
            seed=0,  # pool order, tasks and sampling (the params init is train.seed's)
            mode="threads",  # 'threads' | 'processes'
            samplers=1,
            group_size=8,  # G episodes per task
            groups_per_batch=4,
            groups_per_call=4,  # groups one sampler decodes at once
            max_new_tokens=8,
            max_tokens=16,  # longest training row and the loss's fixed normalizer
            # True: a batch's rows are padded to the shortest of max_tokens, max_tokens/2, ..
            # (>= 256) that holds its longest episode (rl/learning/batch.py row_length): one
            # compiled step per length, none training on padding up to max_tokens. False: always
            # max_tokens (one program; the loss is the same either way).
            length_buckets=True,
            swap_every=2,  # decode iterations between weight-store polls (in-flight update)
            # the samplers' sampling temperature (the loss's log-probs use it too) and MTP draft
            # tokens per verify step: configs/engine_block.py's defaults
            **engine_block.decode_keys("temperature", "speculative_k"),
            # MTP self-distillation in the RL loss (rl/learning/losses.py): the MTP heads follow the
            # policy RL moves, so speculative acceptance holds. < 0: 1.0 when the model has MTP
            # heads and speculative_k > 0, else off; 0: off; > 0: that weight.
            mtp_weight=-1.0,
            # True: a newer version downloads in the background while the engine decodes, and the
            # swap between decode steps costs only set_params (bench/RESULTS.md, issue 32); False:
            # the poll downloads. The toy task's 8-token episodes end before a background
            # download lands, so its in-flight swaps need False.
            prefetch_weights=False,
            max_staleness=4,
            max_ahead=8,  # groups a sampler may produce ahead of the trainer
            # True: the groups of batch b are sampled with the params of step b (no in-flight
            # swaps, deterministic given the seed with one sampler; slower). Compares meshes.
            synchronous=False,
            tis_c=2.0,
            ppo_clip=0.0,
            kl_beta=0.0,
            kl_mode="k2",  # 'k2' | 'reward'
            # > 0: a KL(uniform over valid_vocab || policy) term at each policy token, weighted
            # (rl/learning/grpo.py): a floor under every token's probability that a saturated
            # policy keeps (the k2 KL's and an entropy bonus's gradients vanish there). For
            # small vocabularies (summary_toy: bench/bench_rl_summary.py); 0 = off
            uniform_beta=0.0,
            malformed_adv=0.0,
            # Negative episode advantages x this (1 = plain GRPO). With no length normalization a
            # long failing episode carries many more token terms than a short success; < 1 keeps
            # the update anchored on what worked (0: only above-mean episodes are reinforced).
            negative_adv_scale=1.0,
            valid_vocab=0,  # > 0: logits of ids >= valid_vocab masked (the sampler's valid set)
            router_replay=True,
            # never train zero-signal groups (all rewards equal): batches wait for groups with
            # signal
            dynamic_sampling=False,
            # what the weight store ships: 'bfloat16' | 'float32' (engines cast to decode_dtype)
            weight_dtype="float32",
            full_every=10,
            # Where weights go: '' = <workdir>/weights; a path, a URL (gs://b/x) or a tensorstore
            # kvstore spec as JSON, e.g. '{"driver": "s3", "bucket": "b", "path": "run/",
            # "endpoint": "http://127.0.0.1:8333", "aws_region": "us-east-1"}'
            # (rl/stores/weight_store.py)
            weight_store="",
            # Where episode groups go: '' = <workdir>/rollouts; a path, a URL or a kvstore spec
            # as JSON as for weight_store (rl/stores/store.py), e.g. the same S3 bucket under
            # another path when samplers run on other hosts
            rollout_store="",
            # > 0: each sampler's engine runs sharded over N devices with the mesh below (tensor
            # and expert parallel decode): in threads mode the last N devices of the process
            # (the trainer gets the others), in processes mode a sampler process's first N.
            # 0 = one device, unsharded.
            sampler_devices=0,
            sampler_mesh=dict(data=1, fsdp=1, expert=1, tensor=-1),
            compile_cache="",  # persistent XLA cache dir shared by trainer and sampler processes
        )
    )
    c.rl.coding = ml_collections.ConfigDict(
        dict(
            difficulties=(1, 2, 3),  # generated task difficulties in the pool
            # task families in the pool; () = every training template; a long-context family
            # (rl.envs.taskgen.LONG_CONTEXT_TEMPLATES: long_lookup, for summaries) only if named
            templates=(),
            # a task file instead (rl/envs/grading/tasks.py JSONL, e.g. the pool `python -m
            # rl.envs.repos add` mines from your repository): its first rl.pool_size tasks; '' = off
            tasks="",
            # the samplers' tokenizer: set by resolve to data.tokenizer (the run's one spec, e.g.
            # 'hf:PATH' from `python -m rl.envs.repos.vocabulary`); its vocab is rl.valid_vocab
            tokenizer="",
            max_turns=4,  # turns per episode
            max_turn_tokens=64,  # tokens the policy may emit per turn
            obs_token_budget=128,  # tool-result tokens per call (truncated beyond)
            # > 0: an episode ends after this many consecutive turns with a malformed call or no
            # <|end|> (cheaper sampling of episodes that have lost the tool format); 0 = off
            max_malformed_streak=0,
            workers=4,  # sandbox threads (env reset/step, grading)
            # the engine (configs/engine_block.py): episodes decoded at once, smallest prefill
            # bucket (fewer compiled programs), the latent cache over the sampler's mesh
            # (rl.sampler_mesh; model/engine/split.py); its context is rl.max_tokens, its seed
            # the sampler's
            **engine_block.decode_keys("slots", "cache_split", min_bucket=64),
            # Self-summarization (rl/envs/agent/summary.py): a trigger > 0 makes an episode a chain
            # of up to max_segments segments of rl.max_tokens each; set rl.segments_per_chain to
            # max_segments (one training row per segment)
            summary=dict(trigger_tokens=0, trigger_fraction=0.0, max_segments=4),
            # > 0: best-of-K from a shared mid-episode prefix (rl/sampling/rollout.py): each group's
            # first N turns are played once, snapshotted (sandbox files + token state) and the
            # group's group_size episodes branch from there; the prefix is decoded and its tool
            # calls run once, and its tokens are out of the loss (the group holds no signal about
            # them: its turns learn only from unbranched groups). Needs N < max_turns, no summaries.
            shared_prefix_turns=0,
        )
    )
    # Skip tasks predicted to carry no signal (rl/sampling/curriculum.py): a task whose `key`
    # attribute (e.g. 'meta.package' of a coding task; '' = off) had no outcome spread in each of
    # its last `after` groups is skipped with probability `prob` (counted, never trained).
    # rl.task='summary_toy' (rl/sampling/summary_toy.py): a fact among `facts` ids is visible only
    # before a summary of summary_tokens; the answer (answer_tokens) after it is rewarded for
    # naming it.
    # Needs rl.segments_per_chain = 2 (bench/bench_rl_summary.py); rl.valid_vocab is set to its ids.
    # balanced: every `facts` consecutive tasks of the training order hold each fact once (so
    # each batch of groups_per_batch = facts groups does: rl/sampling/summary_toy.py's
    # balanced_fact); False draws each task's fact independently (the first recipe, which stalled in
    # 3 of 4 runs). entropy_bonus: beta of the summary segment's entropy bonus (rl/learning/batch.py
    # summary_entropy_bonus; 0 = off, the default). Issue 55: on tuning seed 5 (shipped recipe
    # 0.756: two facts' senders deterministic on one summary) 0.05 reached 0.967 (0.1: 0.47, senders
    # near uniform); on fresh seeds 100-107 4 of 8 ended >= 0.9 (off, the shipped recipe: 7 of 10
    # on 100-109): undecided senders stayed near uniform and overlapped instead. rl.uniform_beta
    # (above) at 0.01 did not reach the target either (rl/sampling/summary_toy.py (4)).
    # expected_reward: the summary segment's advantage from the receiver's probability of the
    # right answer given the summary (rl/sampling/summary_toy.py answer_expectation, (5)): with
    # it the toy's bench recipe (which turns it on) ends >= 0.9 on 9 of 10 fresh seeds (issue 55).
    c.rl.summary_toy = ml_collections.ConfigDict(
        dict(
            facts=4,
            summary_tokens=2,
            answer_tokens=2,
            balanced=True,
            entropy_bonus=0.0,
            expected_reward=False,
        )
    )
    c.rl.curriculum = ml_collections.ConfigDict(dict(key="", after=0, prob=0.0))
    c.rl.reward = ml_collections.ConfigDict(dict(outcome="all_pass", malformed_penalty=0.5))
    # The trainer: AdamW without weight decay (b2 0.99), constant LR, clipping at 1; rows and
    # row length follow the rl block (references: an override of rl.group_size resizes them).
    c.train.update(
        steps=0,  # 0 = until the pool is used up (single epoch)
        lr=3e-3,
        schedule="constant",
        warmup_steps=0,
        weight_decay=0.0,
        b2=0.99,
        clip_norm=1.0,
        mtp_mode="none",  # pretraining's MTP loss is off: RL's own term is rl.mtp_weight
        # The MTP heads' own lr: under Adam it alone sets how fast the draft heads follow the
        # policy RL moves (at train.lr 3e-4 heads at the same lr lagged: coding-task acceptance
        # 0.54 -> 0.43; at 3e-3 it ended at 0.64; bench/RESULTS.md "MTP acceptance through coding
        # RL"). Read only by MTP modules (which move only with rl.mtp_weight > 0).
        mtp_lr=3e-3,
        balance_loss=False,
        bias_update_rate=0.0,  # routing is replayed: the sampler's choices made the loads
        log_every=5,
        eval_every=1_000_000,  # no held-out LM evaluation inside RL
    )
    c.train.batch_size = (
        c.rl.get_ref("groups_per_batch")
        * c.rl.get_ref("group_size")
        * c.rl.get_ref("segments_per_chain")
    )
    c.train.seq_len = c.rl.get_ref("max_tokens")
    c.train.seed = c.rl.get_ref("seed")
    c.checkpoint.update(every_steps=5, keep=2)
    return c

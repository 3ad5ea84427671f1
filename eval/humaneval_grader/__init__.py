"""Files installed read-only into the sandbox to grade one HumanEval completion (standard library
only; imports nothing of this package). The value encoding and the runner's process handling are
rl/envs/grading/grader's (plain_values.py, runner_process.py), installed beside these files under
the names `rl.envs.grading.grader.shared_files` gives. See eval/humaneval.py for the design and its
limits."""

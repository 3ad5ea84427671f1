"""Real repositories as environments: setup agent -> env spec -> gate -> mined tasks.

Modules: spec (EnvSpec, the admission gate), setup (the setup agent and its scripted policy),
mine (AST-mutation bugs and feature removals with fail->pass hidden tests), projects (the vendored
projects and the task pool / held-out suite built from them), review_devops (their code review and
DevOps tasks), vendored (where the data is), add (`python -m rl.envs.repos add SOURCE`:
a user's own repository -> spec + gated task pool), fetch (where SOURCE comes from: folder, git
checkout or URL, sdist, NAME==VERSION via pip), suites (`... suite`: a held-out suite from any
specs), chat_policy (a model behind an OpenAI-compatible endpoint as the setup agent). The
vendored snapshots (under their own licenses: data/repos/vendor/README.md), their specs and the
committed suites are data, in data/repos/.
"""

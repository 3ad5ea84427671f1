"""Real repositories as environments: setup agent -> env spec -> gate -> mined tasks.

Modules: spec (EnvSpec, the admission gate), setup (the setup agent and its scripted policy),
mine (AST-mutation bugs and feature removals with fail->pass hidden tests), projects (the vendored
projects and the task pool / held-out suite built from them). Vendored snapshots live in vendor/
under their own licenses (vendor/README.md).
"""

"""The sandbox and its limits: one episode's repository in an isolated process
(namespaces, seccomp, rlimits), cgroup v2 limits where the host delegates them.
"""

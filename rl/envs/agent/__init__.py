"""The agent-facing environment: the multi-turn coding env and its episode
record (env.py), the tools and their schemas (tools.py, search.py), the self-summary protocol
(summary.py), scripted policies (scripted.py) and copy-on-write episode branches (snapshot.py).
"""

"""The bottom layer of rl/: what every other rl/ folder may import and that imports
none of them. The episode schema (schema.py: an episode's grade, counts and reward, one typed
definition, with the pass and partial-credit rules), the episode record (per-token fields written
once, by every sampler, carrying that schema), the reward (a pure function of an episode's grade
and counts), episode metrics and the pass@k estimator, and the run's timeline (spans of every
process and thread -> a Chrome trace).
"""

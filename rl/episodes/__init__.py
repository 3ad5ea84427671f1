"""The bottom layer of rl/: what every other rl/ folder may import and that imports
none of them. The episode record (per-token fields written once, by every sampler), the reward (a
pure function of an episode's grade and counts), episode metrics and the pass@k estimator, and the
run's timeline (spans of every process and thread -> a Chrome trace).
"""

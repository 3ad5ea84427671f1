"""The two stores samplers and trainers share (and nothing else): weights one way, rollouts the
other, both on a key-value store (a local folder, or S3 through tensorstore).

    weight_store.py       shard-wise weights: snapshots + lossless deltas, resharding fetch, GC,
                          promotions (+ weight_store_rans.py: the deltas' entropy coder)
    store.py              the rollout store: one atomically written object per group
    kvstore.py            the bounded kvstore client both use (one-line errors, no hangs)
"""

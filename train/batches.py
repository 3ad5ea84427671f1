"""The run's batch sources: a resumable train iterator and held-out batches, per host.

'pipeline' is data/'s Grain pipeline (sources, packing, mixing, host sharding); 'synthetic' and
'local_text' are the small stand-ins in train/synthetic_data.py (tests, offline demos).
"""

from __future__ import annotations

import jax

from model.errors import ConfigError
from train import synthetic_data
from train.evaluate import BATCH_KEYS, EVAL_KEYS


class _KeyFilter:
    """Wraps a grain iterator: same get_state/set_state, batches restricted to BATCH_KEYS."""

    def __init__(self, it):
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        batch = next(self.it)
        return {k: batch[k] for k in BATCH_KEYS}

    def get_state(self):
        return self.it.get_state()

    def set_state(self, state):
        self.it.set_state(state)


def data_config(config):
    """The run config's data.* and train.{seq_len, batch_size, seed} as data/'s DataConfig (so
    configs/sft.py is the one SFT data spec: benches and tests derive from it too)."""
    from data import pipeline

    t, d = config.train, config.data
    return pipeline.DataConfig.from_dict(
        dict(
            sources=[dict(s) for s in d.sources],
            tokenizer=d.tokenizer,
            seq_len=t.seq_len,
            global_batch_size=t.batch_size,
            seed=t.seed,
            held_out_fraction=d.heldout_fraction,
            strict=d.strict,
            avoid_splitting=d.avoid_splitting,
            tool_output_budget=d.get("tool_output_budget", 0),
        )
    )


def _pipeline(config, vocab_size: int, counters):
    from data import pipeline
    from data.sources import DataError
    from data.tokenizers import load_tokenizer

    t = config.train
    try:
        dcfg = data_config(config)
        tok = load_tokenizer(dcfg.tokenizer)
        if tok.vocab_size > vocab_size:
            raise ConfigError(
                f"data.tokenizer has {tok.vocab_size} ids but the model vocab_size is {vocab_size}"
            )
        train_it = _KeyFilter(pipeline.train_iterator(dcfg, counters, tok))
        heldout = pipeline.held_out_batches(dcfg, counters, tok, num_batches=t.eval_batches)
        heldout = [{k: b[k] for k in EVAL_KEYS if k in b} for b in heldout]
    except (ValueError, OSError, DataError) as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"data: {' '.join(str(e).split())}") from None
    return train_it, heldout


def data_iterators(config, vocab_size: int, counters=None):
    """(train iterator for this host, list of held-out batches for this host)."""
    t, d = config.train, config.data
    if d.source == "pipeline":
        return _pipeline(config, vocab_size, counters)
    if d.source == "synthetic":
        tokens = synthetic_data.synthetic_tokens(200_000, vocab_size, t.seed)
    elif d.source == "local_text":
        tokens = synthetic_data.local_text_tokens(d.max_bytes)
    else:
        raise ConfigError(
            f"data.source={d.source!r}: expected 'pipeline', 'local_text' or 'synthetic'"
        )
    cut = int(len(tokens) * (1 - d.heldout_fraction))
    shard = dict(shard_index=jax.process_index(), shard_count=jax.process_count())
    train_it = synthetic_data.lm_batches(
        tokens[:cut], batch_size=t.batch_size, seq_len=t.seq_len, seed=t.seed, **shard
    )
    heldout_it = synthetic_data.lm_batches(
        tokens[cut:], batch_size=t.batch_size, seq_len=t.seq_len, seed=0, shuffle=False, **shard
    )
    return train_it, [next(heldout_it) for _ in range(t.eval_batches)]

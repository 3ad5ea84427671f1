"""Real-time RL from user feedback: one cycle per run (rl/serve/realtime.py).

    python main.py --mode=serve --params=DIR --workdir=W                   # serves, logs, follows
    python main.py --mode=rl --config=configs/realtime.py --workdir=W --config.realtime.params=DIR

A cycle reads the signals POSTed to /v1/feedback since the last cycle (W/interactions), maps them
to rewards (rl/serve/feedback.py: accepted +1, rejected -1, dissatisfied -0.5, edited by similarity
to the kept text in [-0.5, 0.5], rating (r - 3) / 2), trains the newest promoted params on them with
the one trainer and the RL loss (importance correction against the logged log-probs, router
replay), evaluates the candidate with `eval.suites`, and publishes it to W/weights as promoted
only if no `realtime.gates` metric regresses beyond its tolerance; the server swaps to it between
decode steps. Each cycle writes W/realtime/cycle_<n>/report.json (data used, reward statistics,
eval deltas, decision and why). Run it on a schedule (Composer ships one every ~5 hours).
Expect (tiny, CPU): tests/test_realtime.py's cycle, ~1-2 minutes.
"""

import ml_collections

from configs import eval as eval_config
from configs import rl as rl_config


def get_config() -> ml_collections.ConfigDict:
    c = rl_config.get_config()  # the trainer, the RL loss and its rl block (tis_c, router replay)
    c.eval = eval_config.get_config().eval
    c.eval.suites = "nll"  # the suites every candidate runs (eval/run.py); add humaneval,agentic
    c.realtime = ml_collections.ConfigDict(
        dict(
            params="",  # the served base export of the first cycle (later: the newest promoted)
            base_version=0,  # its version (what the server records for it)
            log_dir="",  # '' = <workdir>/interactions (configs/serve.py's log)
            weight_store="",  # '' = <workdir>/weights (what the server follows)
            # Gated metrics '<suite>/<metric>:<min|max>:<tolerance>' (eval/promotion.py): a
            # candidate regressing any beyond its absolute tolerance is not promoted.
            # 'spec/acceptance:floor:F': the MTP drafts' speculative acceptance (measured on the
            # nll suite's held-out tokens) must be >= F, so a candidate that would serve slower
            # is refused (trained heads: 0.76-0.92, bench/RESULTS.md; drop it for a model
            # without MTP heads, where the metric is missing and the gate fails closed).
            gates="nll/nll@128:min:0.02,spec/acceptance:floor:0.5",
            min_records=4,  # fewer usable signals: skip the cycle (the cursor stays)
            max_staleness=4,  # versions; older responses are dropped (rl/serve/feedback.py)
            baseline="cycle",  # advantage = reward - the cycle's mean reward | 'none': reward
            epochs=1,  # passes over the cycle's signals
            # Poisoning guard (rl/serve/feedback.py): no API key holds more than this share of
            # a cycle's signals (its latest kept), nor of one batch's rows; with 0.25 a cycle
            # needs signals from >= 4 keys. 1.0 = off (a single-user server)
            max_key_share=0.25,
            batch_key_share=0.25,
            reward=dict(
                accepted=1.0, rejected=-1.0, dissatisfied=-0.5, edited_min=-0.5, edited_max=0.5
            ),
        )
    )
    c.rl.temperature = 1.0  # the server's (configs/serve.py): logged log-probs are at it
    c.rl.max_tokens = 512  # training row length (a longer exchange is dropped, counted)
    c.train.batch_size = 8
    c.train.lr = 1e-4
    c.checkpoint.update(every_steps=1000, keep=1)
    return c

"""Follows the weight store's newest *promoted* version (rl/stores/weight_store.py `Promotions`) and
offers it to the engine loop, which swaps it in between decode steps.

Fetching runs on this thread (reading and decoding a version takes a while for a big model), so
the engine thread only pays set_params; a store that fails to answer is logged and retried at the
next poll, never crashing the server.

The thread is stopped and joined at interpreter exit if nobody stopped it (atexit): a daemon
thread still inside tensorstore when CPython finalizes is killed there (pthread_exit unwinding
C++ frames) and the process aborts, 'terminate called without an active exception' (it polls
every poll_s, so it is in tensorstore often: a bench that never stopped it exited with 134).
"""

from __future__ import annotations

import atexit
import sys
import threading

import jax.numpy as jnp

from rl.stores.weight_store import Promotions, StoreError, WeightReader


class PromotedFollower:
    def __init__(self, store: str, loop, *, poll_s: float = 1.0, log=None):
        self.store, self.loop, self.poll_s = store, loop, poll_s
        self.log = log or (lambda line: print(line, file=sys.stderr))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="promoted-follower", daemon=True)
        self.swaps, self.offered = 0, -1

    def start(self) -> PromotedFollower:
        self.thread.start()
        atexit.register(self.stop)  # module docstring: never left running into finalization
        return self

    def stop(self) -> None:
        atexit.unregister(self.stop)
        self.stopping.set()
        self.thread.join(timeout=30)

    def check(self, promotions: Promotions, reader: WeightReader) -> int | None:
        """One poll: offers the newest promoted version if it is newer than the engine's."""
        v = promotions.latest()
        if v is None or v <= max(self.loop.version, self.offered):
            return None
        params, got = reader.fetch(version=v)
        self.loop.offer_params(_as_engine_params(params), got)
        self.swaps, self.offered = self.swaps + 1, got
        self.log(f"serve: params version {got} (promoted) offered to the engine")
        return got

    def _run(self) -> None:
        promotions = reader = None
        while not self.stopping.wait(self.poll_s):
            try:
                promotions = promotions or Promotions(self.store, timeout=10.0)
                reader = reader or WeightReader(self.store, timeout=10.0, log=self.log)
                self.check(promotions, reader)
            except (StoreError, ValueError, OSError, KeyError) as e:
                self.log(f"serve: weight store poll failed: {e}")


def _as_engine_params(params):
    """The store's numpy arrays (sampler dtype) -> jax arrays, on the device before the engine
    loop swaps them in (the engine casts them to its decode dtype: model.decode.decode_params)."""
    import jax

    return jax.tree.map(jnp.asarray, params)

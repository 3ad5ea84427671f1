"""The one thread that owns the decode engine (model/engine/ is not thread-safe) and steps it.

    loop = EngineLoop(engine, stream_every=8); loop.start()
    loop.submit(Job(rid, prompt, max_new, stops, sink, sampling))   # from any thread
                                                                      (HTTP handlers)
    loop.offer_params(params, version)                      # from the weight-store follower

Each round: take new jobs (engine.submit: they join the running decode at the next step, in
free slots: continuous batching), swap in offered params if any (between decode steps, so an
in-flight request keeps its cache and its later tokens record the new version), decode up to
`stream_every` iterations, send each running request its new tokens, and finish the turns that
ended: the sink gets ('delta', ids, raw) events, then one ('done', Result) or ('error', message).
Sinks are called on this thread and must not block (the app posts them to its event loop).

A job with `logprobs` (the engine built with top_logprobs >= 0) gets its tokens' raw log-probs
(RolloutEngine.raw_logprobs: the model's distribution, before temperature and filters) beside
them: ('delta', ids, raw) with raw = (log-probs [n], top ids [n,W], top log-probs [n,W]) of
those ids, and Result.raw for the whole completion; other jobs get ('delta', ids, None).

Each job samples with its own settings (engine Sampling). A job with `stop_at` (stop strings)
is checked after every round: once its tokens complete a stop string the engine ends its turn
(RolloutEngine.end_turn) and the result keeps the tokens up to the one that completed it, so no
delta ever goes past it; the slot is free for the next request at once.

Cancellation (a client that went away, rl/serve/app.py): `cancel(rid)` from any thread; at the
start of the next round the engine thread ends that job's turn (or drops it from the queue),
frees its slot and sends ('error', 'cancelled: ...'). So a cancelled job decodes at most the
round in progress when it was cancelled: `stream_every` iterations. A job older than `timeout_s`
(a client that stopped reading its stream holds its slot otherwise) is cancelled the same way.
"""

from __future__ import annotations

import atexit
import dataclasses
import queue
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

from model.engine import Sampling


@dataclasses.dataclass
class Job:
    rid: str
    prompt: list[int]
    max_new: int
    stops: list[int]
    sink: Callable[[tuple], None]
    sampling: Sampling | None = None  # None: the engine's defaults
    stop_at: Callable[[list[int]], int | None] | None = None  # emitted ids -> tokens to keep
    logprobs: bool = False  # deltas and the result carry raw log-probs
    t_submit: float = dataclasses.field(default_factory=time.perf_counter)
    sent: int = 0  # tokens already delivered as deltas


@dataclasses.dataclass
class Result:
    """A finished request, token-exact: what the log stores and RL trains on."""

    tokens: list[int]  # emitted ids (a final stop token included)
    logprobs: list[float]  # [n] sampler log-probs
    versions: list[int]  # [n] params version per emitted token
    experts: np.ndarray  # [n_moe, prompt + n, k] routing per position (the last row repeated)
    finish_reason: str  # 'stop' | 'length'
    seconds: float  # submit -> done
    raw: tuple | None = None  # Job.logprobs: ([n] log-probs, [n,W] top ids, [n,W] top log-probs)


class EngineLoop:
    def __init__(self, engine, *, stream_every: int = 8, on_tokens=None, timeout_s: float = 0):
        self.engine, self.stream_every, self.timeout_s = engine, stream_every, timeout_s
        self.cancelled: set[str] = set()  # rids to end at the next round (guarded by lock)
        self.retry: set[str] = set()  # cancels that found no job last round (kept one more)
        self.cancels = 0  # jobs ended early (cancel or timeout), for tests and metrics
        self.inbox: queue.Queue[Job] = queue.Queue()
        self.jobs: dict[str, Job] = {}
        self.offered = None  # (params, version) waiting for the next round
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.on_tokens = on_tokens or (lambda n: None)  # metrics: tokens emitted this round
        self.thread = threading.Thread(target=self._run, name="engine-loop", daemon=True)
        self.error: BaseException | None = None
        self.version = int(engine.version)
        self.swap_seconds: list[float] = []  # engine-thread time of each set_params
        # the engine's decode counters (speculative acceptance for /metrics), read by the engine
        # thread after each round: another thread must not read the engine's state mid-step
        self.counters = engine.counters()

    # -- any thread

    def start(self) -> EngineLoop:
        self.thread.start()
        # Joined at exit if nobody stopped it: a daemon thread inside JAX when CPython finalizes
        # aborts the process (rl/serve/follow.py's docstring).
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        """Ends the loop after its round in progress and joins the thread, however long that
        round takes: a thread left inside JAX at interpreter exit aborts the process (a 30 s
        join did, exit -6, when SIGTERM found the thread in a compile at load 14)."""
        atexit.unregister(self.stop)
        self.stopping.set()
        while self.thread.is_alive():
            self.thread.join(timeout=30)
            if self.thread.is_alive():
                print("engine loop: waiting for its round in progress to end", file=sys.stderr,
                      flush=True)  # fmt: skip

    def submit(self, job: Job) -> None:
        if not self.alive:
            raise RuntimeError(f"engine loop is not running ({self.error!r})")
        self.inbox.put(job)

    def cancel(self, rid: str) -> None:
        """Ends a job at the next round (a job already done or unknown: nothing happens)."""
        with self.lock:
            self.cancelled.add(rid)

    def offer_params(self, params, version: int) -> None:
        with self.lock:
            self.offered = (params, version)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self.stopping.is_set()

    @property
    def depth(self) -> tuple[int, int]:
        """(requests waiting for a slot, requests decoding)."""
        waiting = self.inbox.qsize() + self.engine.queued
        return waiting, len(self.jobs) - self.engine.queued

    # -- the engine thread

    def _run(self) -> None:
        try:
            while not self.stopping.is_set():
                self._admit(block=not self.jobs)
                self._cancel()
                self._swap()
                if self.jobs:
                    self._round()
        except BaseException as e:  # the thread dies loudly: waiting requests get an error
            self.error = e
            for job in self.jobs.values():
                job.sink(("error", f"engine failed: {type(e).__name__}: {e}"))
            raise

    def _admit(self, block: bool) -> None:
        try:
            first = self.inbox.get(timeout=0.05) if block else self.inbox.get_nowait()
        except queue.Empty:
            return
        for job in [first] + _drain(self.inbox):
            try:
                self.engine.submit(
                    job.rid,
                    job.prompt,
                    max_new=job.max_new,
                    stop_tokens=job.stops,
                    sampling=job.sampling,
                    logprobs=job.logprobs,
                )
            except ValueError as e:  # checked by the app first; never take the loop down
                job.sink(("error", str(e)))
                continue
            self.jobs[job.rid] = job

    def _cancel(self) -> None:
        """Ends the jobs cancelled since the last round and those past timeout_s: the engine
        stops decoding them now and frees their slots. A cancel that finds no job is kept one
        more round (its job may have reached the inbox after this round's admission)."""
        with self.lock:
            gone, self.cancelled = self.cancelled, set()
        now = time.perf_counter()
        late = {
            r for r, j in self.jobs.items() if self.timeout_s and now - j.t_submit > self.timeout_s
        }
        ending = (gone | late) & set(self.jobs)
        self.retry = {r for r in gone - ending if r not in self.retry}
        with self.lock:
            self.cancelled |= self.retry
        running = self.engine.partial() if ending else {}
        for rid in ending:
            job = self.jobs.pop(rid)
            if rid in running:  # decoding: end the turn, then free the slot
                self.engine.end_turn(rid)
            self.engine.finish(rid)
            self.cancels += 1
            why = "client disconnected" if rid in gone else f"past {self.timeout_s:g} s"
            job.sink(("error", f"cancelled: {why}"))

    def _swap(self) -> None:
        with self.lock:
            offered, self.offered = self.offered, None
        if offered is not None:
            t0 = time.perf_counter()
            self.engine.set_params(*offered)
            self.version = int(offered[1])
            self.swap_seconds.append(time.perf_counter() - t0)

    def _round(self) -> None:
        ended = [
            (turn, self._cut(turn.request, turn.tokens))
            for turn in self.engine.step(self.stream_every)
        ]
        emitted = 0
        for rid, ids in self.engine.partial().items():
            cut = self._cut(rid, ids)
            if cut is not None:  # a stop string: end the turn now, keep what led to it
                ended.append((self.engine.end_turn(rid), cut))
                continue
            emitted += self._send(self.jobs[rid], ids)
        for turn, cut in ended:
            emitted += self._finish(turn, cut)
        self.counters = self.engine.counters()
        self.on_tokens(emitted)

    def _cut(self, rid: str, ids: list[int]) -> int | None:
        job = self.jobs[rid]
        return job.stop_at(ids) if job.stop_at is not None else None

    def _send(self, job: Job, ids: list[int], raw: tuple | None = None) -> int:
        """Delivers ids past those already sent (with their raw log-probs if the job asked: from
        `raw`, the whole completion's, else fetched); -> how many."""
        if len(ids) <= job.sent:
            return 0
        new = None
        if job.logprobs:
            raw = raw or self._raw(job, len(ids))
            new = tuple(x[job.sent : len(ids)] for x in raw)
        job.sink(("delta", ids[job.sent :], new))
        n, job.sent = len(ids) - job.sent, len(ids)
        return n

    def _raw(self, job: Job, n: int) -> tuple:
        """Raw log-probs of a job's first n emitted tokens (a live request's)."""
        p = len(job.prompt)  # emitted token j sits at position len(prompt) + j
        return self.engine.raw_logprobs(job.rid, p, p + n)

    def _finish(self, turn, cut: int | None) -> int:
        """Completes a job with its ended turn, or its first `cut` tokens (a stop string ended
        it); -> tokens newly sent."""
        job = self.jobs.pop(turn.request)
        n = len(turn.tokens) if cut is None else cut
        raw = self._raw(job, n) if job.logprobs else None  # before finish frees the slot
        rows = self.engine.finish(turn.request)  # [prompt + emitted - 1, n_moe, k]
        rows = rows[: len(job.prompt) + n - 1]
        rows = np.concatenate([rows, rows[-1:]], 0) if len(rows) else rows
        sent = self._send(job, turn.tokens[:n], raw)
        job.sink(
            (
                "done",
                Result(
                    tokens=list(turn.tokens[:n]),
                    logprobs=[float(x) for x in turn.logprobs[:n]],
                    versions=[int(x) for x in turn.versions[:n]],
                    experts=np.moveaxis(rows, 1, 0),
                    finish_reason=turn.finish_reason if cut is None else "stop",
                    seconds=time.perf_counter() - job.t_submit,
                    raw=raw,
                ),
            )
        )
        return sent


def _drain(q: queue.Queue) -> list:
    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out

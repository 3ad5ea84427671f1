"""The engine's host side: `RolloutEngine`, an open request queue over B slots. It validates
requests, assigns slots, groups pending prefills by length bucket, picks each call's row and
cache-window buckets (model/engine/programs.py, "Compiled programs"), runs the device programs
under the engine's mesh, and turns finished slots into `Turn`s. Not thread-safe: one thread drives
it (rl/sampling/rollout.py, rl/serve/engine_loop.py).

Requests move queued -> prefill -> running -> paused (-> prefill on `extend` ...) and leave on
`finish`. Rewinding (self-summarization, rl/envs/agent/summary.py): `rewind(rid, keep)` cuts a
paused sequence back to its first `keep` tokens and `extend` then appends a rebuilt context. The
cache entries of positions < keep - 1 were computed from exactly those tokens and are kept (no
re-prefill of the shared prefix); token keep-1 becomes pending again; later entries are rewritten
before any query reads them (the same argument as a reused slot). `experts(rid)` reads a paused
request's routing rows without freeing it (the finished segment's record).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from model import sharding as sh
from model.config import ModelConfig
from model.decode import decode_params, engine_config, split_layer_specs, split_layers
from model.engine.map_limit import ensure_room
from model.engine.programs import (
    _decode_jit,
    _end_turns_jit,
    _fetch_experts_jit,
    _fetch_raw_jit,
    _fetch_turn_jit,
    _init_jit,
    _prefill_jit,
    _sharded_programs,
)
from model.engine.slots import Spec
from model.engine.split import check_split, engine_rules
from model.params import param_logical_specs
from model.sampling import SamplingParams, check


def _buckets(lo: int, hi: int) -> list[int]:
    """Powers-of-two multiples of lo below hi, then hi."""
    out, b = [], lo
    while b < hi:
        out.append(b)
        b *= 2
    return out + [hi]


def _kv_buckets(t_buckets: list[int]) -> list[int]:
    """Cache windows for prefill: the T buckets and the midpoints 1.5 x between them (a window is
    then at most 1.5x the context it serves, at two programs per octave)."""
    hi = t_buckets[-1]
    mids = [b * 3 // 2 for b in t_buckets if b % 2 == 0 and b * 3 // 2 < hi]
    return sorted(set(t_buckets) | set(mids))


def _bucket(n: int, buckets: list[int]) -> int:
    return next(b for b in buckets if b >= n)


@dataclasses.dataclass
class Turn:
    """One finished turn of a request: emitted ids with their sampler log-probs and params
    versions."""

    request: object
    tokens: list[int]
    logprobs: np.ndarray  # [n] float32
    versions: np.ndarray  # [n] int32
    finish_reason: str  # 'stop' (the stop token is the last of tokens) | 'length'
    start: int  # absolute position of tokens[0] in the request's sequence


@dataclasses.dataclass(frozen=True)
class Sampling:
    """One turn's sampling settings (model/sampling.py): temperature 0 = greedy, top_k <= 0 and
    top_p = 1 = no filter. The recorded log-probs are those of the distribution these define."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None  # in [0, 2**31): the request's own rng stream (None: the engine's)


@dataclasses.dataclass
class _Request:
    rid: object
    new: list[int]  # tokens waiting to be prefilled (whole prompt, or an observation)
    max_new: int
    stops: list[int]
    forced: list[int]
    sampling: Sampling
    seed: int = 0  # the request's stream: Sampling.seed, or drawn from the engine's seed
    turns: int = 0  # turns prefilled so far (each turn folds its number into the stream)
    slot: int = -1
    length: int = 0  # tokens of the sequence known to the engine (incl. emitted)
    pending: int | None = None  # after rewind(): the pending token (else the device's)
    state: str = "queued"  # queued -> prefill -> running -> paused (-> prefill ...)
    logprobs: bool = False  # record raw log-probs + top alternatives (engine top_logprobs >= 0)


class RolloutEngine:
    """Slots + an open request queue. Not thread-safe: drive it from one thread
    (rl/sampling/rollout.py).
    speculative_k: MTP draft tokens per verify step (0 = plain decoding; > 0 needs MTP modules).
    temperature / top_k / top_p: the default sampling settings; a turn may bring its own
    (`submit(..., sampling=Sampling(...))`), and every slot samples with its own in the same
    compiled programs (the settings are per-slot arrays, not static)."""

    def __init__(
        self,
        cfg: ModelConfig,
        params,
        *,
        slots: int = 8,
        cache_len: int = 1024,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        valid_vocab: int = 0,
        seed: int = 0,
        params_version: int = 0,
        stop_width: int = 4,
        min_bucket: int = 16,
        speculative_k: int = 0,
        mesh=None,
        rules=None,
        compact: bool = True,
        top_logprobs: int = -1,
        cache_split: str = "none",
    ):
        """mesh (model.sharding.role_mesh; None: one device): params and the latent cache are
        sharded over it by the logical `rules` (default model.sharding.DEFAULT_RULES): heads, FFN
        width and vocab over tensor, experts over expert, the model dim over fsdp, slots over
        (data, fsdp), and every program runs under it. With an expert axis > 1 on CPU, set
        cfg.moe_comm='alltoall' (model/moe_a2a.py; 'auto' picks it on GPU/TPU): the 'gspmd'
        dispatch slices experts by a traced index, which GSPMD serves by all-gathering each MoE
        layer's experts over the expert axis at every decode step (tests/test_engine_sharding.py
        probes the compiled program).
        compact: decode only the running slots (model/engine/programs.py, "Live rows only");
        False runs every slot at every step, as the engine did before (bench/bench_serve.py's
        baseline).
        top_logprobs: W >= 0 keeps, for requests submitted with logprobs=True, each emitted
        token's raw log-prob and its top-W alternatives (`raw_logprobs`); -1 (default) keeps no
        buffers. Decode calls with no such request running do not compute them (a static flag).
        cache_split: 'none' | 'slots' | 'sequence' | 'slots+sequence', what the latent cache is
        split by across the mesh besides data and fsdp (model/engine/split.py): slots over the
        expert axis too (data-parallel attention), positions over the context axis. A sequence
        split decodes and prefills every slot in place over the whole cache (no row gathers, no
        windows: a window would sit on the first chips of the context axis)."""
        if speculative_k < 0 or (speculative_k and cfg.num_mtp_modules == 0):
            raise ValueError(
                f"speculative_k={speculative_k}: speculative decoding needs speculative_k >= 0 and "
                f"MTP modules (config has num_mtp_modules={cfg.num_mtp_modules})"
            )
        if slots <= 0 or cache_len < 2 or cache_len > cfg.max_position_embeddings:
            raise ValueError(
                f"RolloutEngine: need slots > 0 and 2 <= cache_len <= max_position_embeddings="
                f"{cfg.max_position_embeddings}, got slots={slots}, cache_len={cache_len}"
            )
        if valid_vocab > cfg.vocab_size:
            raise ValueError(f"valid_vocab={valid_vocab} exceeds the model vocab {cfg.vocab_size}")
        if top_logprobs > cfg.vocab_size:
            raise ValueError(f"top_logprobs={top_logprobs} exceeds the vocab {cfg.vocab_size}")
        platform = (mesh.devices.flat[0] if mesh is not None else jax.devices()[0]).platform
        self.cfg = cfg = engine_config(cfg, platform)  # decode_dtype resolved (state.py, "Dtype")
        self.spec = Spec(slots, cache_len, stop_width, speculative_k, max(top_logprobs, -1))
        SamplingParams.make(temperature, top_k, top_p, valid_vocab)  # checks them
        self.sampling = Sampling(float(temperature), int(top_k), float(top_p))
        self.valid = valid_vocab or cfg.vocab_size
        self.compact = compact
        if cache_split != "none" and mesh is None:
            raise ValueError(f"cache_split={cache_split!r} needs a mesh to split the cache over")
        self._shard(mesh, engine_rules(rules or sh.DEFAULT_RULES, cache_split))
        self.seq_split = "sequence" in cache_split and mesh.shape["context"] > 1
        self.set_params(params, params_version)
        self.t_buckets = _buckets(min(min_bucket, cache_len), cache_len)
        self.r_buckets = _buckets(1, slots)
        self.kv_buckets = _kv_buckets(self.t_buckets)
        n_r, n_t, n_kv = len(self.r_buckets), len(self.t_buckets), len(self.kv_buckets)
        self.max_programs = 4 + n_r * n_kv + n_r * n_t * n_kv
        if self.spec.top_logprobs >= 0:  # decode recording raw log-probs, and their fetch
            self.max_programs += n_r * n_kv + 1
        self.programs: set[tuple] = {("init",)}
        with self._context():
            self.state = self._init(cfg, self.spec)
        self._rng = np.random.default_rng(seed)  # the streams of requests without a seed
        self._free = list(range(slots))
        self._queue: collections.deque[_Request] = collections.deque()
        self._requests: dict[object, _Request] = {}
        self.timing = {"prefill_s": 0.0, "decode_s": 0.0}

    def set_params(self, params, version: int) -> None:
        """In-flight weight update: the caches stay; later tokens record the new version. The
        engine holds the params split per layer (model.decode.split_layers: no per-iteration
        slicing of stacked weights in the decode loop). A sharded engine places them on its own
        shardings, from wherever they are (host arrays, a trainer's mesh on other devices). Any
        dtypes: they are cast to the engine's (model.decode.decode_params) on their own devices."""
        split = split_layers(decode_params(self.cfg, params))
        if self.mesh is not None:
            sh.check_divisible(split, self._param_shardings, "params")
            split = jax.device_put(split, self._param_shardings)
        else:  # host arrays onto the device once, not at every call
            split = jax.device_put(split)
        self.params, self.version = split, jnp.int32(version)

    def _shard(self, mesh, rules) -> None:
        """Shardings and programs for `mesh` (None: the unsharded module-level programs)."""
        self.mesh, self.rules = mesh, sh.normalize_rules(rules or sh.DEFAULT_RULES)
        self._init, self._prefill, self._decode = _init_jit, _prefill_jit, _decode_jit
        self._end = _end_turns_jit
        if mesh is None:
            return
        sh.check_model_mesh(self.cfg, mesh)
        check_split(mesh, self.rules, self.spec.slots, self.spec.cache_len)
        specs = split_layer_specs(self.cfg, param_logical_specs(self.cfg))
        self._param_shardings = sh.logical_shardings(specs, mesh, self.rules)
        programs = _sharded_programs(self.cfg, self.spec, mesh, self.rules)
        self._init, self._prefill, self._decode, self._end = programs

    def _context(self):
        """The mesh and logical rules every program of a sharded engine is traced under."""
        if self.mesh is None:
            return contextlib.nullcontext()
        return sh.mesh_context(self.mesh, self.rules)

    # -- requests

    def submit(
        self,
        rid,
        prompt,
        *,
        max_new: int,
        stop_tokens=(),
        forced=None,
        sampling=None,
        logprobs: bool = False,
    ) -> None:
        """Queues a new request; it starts when a slot is free (call step()). sampling: this
        turn's Sampling (None: the engine's defaults). logprobs: record its tokens' raw log-probs
        and top alternatives (`raw_logprobs`; needs an engine built with top_logprobs >= 0)."""
        if rid in self._requests:
            raise ValueError(f"request {rid!r} already exists")
        if len(prompt) == 0:
            raise ValueError(f"request {rid!r}: empty prompt")
        if logprobs and self.spec.top_logprobs < 0:
            raise ValueError(f"request {rid!r}: logprobs need an engine with top_logprobs >= 0")
        req = _Request(rid, *self._turn_args(rid, prompt, max_new, stop_tokens, forced, sampling))
        req.logprobs = bool(logprobs)
        seed = req.sampling.seed
        req.seed = int(self._rng.integers(2**31)) if seed is None else seed
        self._requests[rid] = req
        self._queue.append(req)

    def extend(
        self, rid, tokens, *, max_new: int, stop_tokens=(), forced=None, sampling=None
    ) -> None:
        """Continues a paused request: appends `tokens` (an observation) and starts its next turn
        (sampling: as in submit)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            state = "unknown" if req is None else req.state
            raise ValueError(f"extend({rid!r}): request is {state}, not paused after a turn")
        if len(tokens) == 0:
            raise ValueError(f"extend({rid!r}): no tokens to append")
        req.new, req.max_new, req.stops, req.forced, req.sampling = self._turn_args(
            rid, tokens, max_new, stop_tokens, forced, sampling
        )
        req.state = "prefill"

    def finish(self, rid) -> np.ndarray:
        """Frees the request's slot. -> experts [consumed, n, k] (rows of every consumed token)."""
        req = self._requests.get(rid)
        if req is None or req.state not in ("paused", "queued"):
            raise ValueError(f"finish({rid!r}): request is not paused")
        del self._requests[rid]
        if req.state == "queued":
            self._queue.remove(req)
            return np.zeros(
                (0, self.cfg.num_moe_layers, max(self.cfg.num_experts_per_tok, 1)), np.int32
            )
        self._free.append(req.slot)
        return self._experts_of(req)

    def experts(self, rid) -> np.ndarray:
        """A paused request's routing rows [consumed, n, k], the slot kept (finish's rows)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            raise ValueError(f"experts({rid!r}): request is not paused")
        return self._experts_of(req)

    def _experts_of(self, req: _Request) -> np.ndarray:
        self.programs.add(("fetch_experts",))
        with self._context():
            experts = np.asarray(_fetch_experts_jit(self.state, jnp.int32(req.slot)))
        return experts[: req.length - 1]  # the last token is pending (never consumed)

    def rewind(self, rid, keep: int) -> None:
        """Cuts a paused request back to its first `keep` tokens (1 <= keep <= its length); the
        next `extend` continues from there with the prefix's cache kept. Not with speculative
        decoding (its MTP buffer holds the old sequence's last positions)."""
        req = self._requests.get(rid)
        if req is None or req.state != "paused":
            raise ValueError(f"rewind({rid!r}): request is not paused")
        if not 1 <= keep <= req.length:
            raise ValueError(f"rewind({rid!r}, {keep}): keep must be in 1..{req.length}")
        if self.spec.draft:
            raise ValueError(f"rewind({rid!r}): not supported with speculative_k > 0")
        req.pending = int(np.asarray(self.state.tokens[req.slot, keep - 1]))
        req.length = keep

    def sequence(self, rid) -> list[int]:
        """The tokens the engine holds for a request's slot (what the model consumed + pending)."""
        req = self._requests[rid]
        return [int(t) for t in np.asarray(self.state.tokens[req.slot, : req.length])]

    def partial(self) -> dict:
        """{rid: tokens emitted so far} of every running turn (streaming between step calls: one
        [B,S] fetch, not one per request)."""
        running = [r for r in self._requests.values() if r.state == "running"]
        if not running:
            return {}
        tokens, ngen = jax.device_get((self.state.tokens, self.state.ngen))
        return {
            r.rid: [int(t) for t in tokens[r.slot, r.length : r.length + int(ngen[r.slot])]]
            for r in running
        }

    @property
    def queued(self) -> int:
        """Requests waiting for a free slot."""
        return len(self._queue)

    def counters(self) -> dict:
        """Decode iterations, slot-steps (active slots summed over iterations), MTP tokens drafted
        and accepted so far."""
        names = ("iterations", "slot_steps", "drafted", "accepted")
        return dict(zip(names, (int(x) for x in jax.device_get(self.state.stats))))

    @property
    def busy(self) -> bool:
        return any(r.state in ("queued", "prefill", "running") for r in self._requests.values())

    def _turn_args(self, rid, new, max_new, stop_tokens, forced, sampling):
        new, stops, forced = list(new), list(stop_tokens), list(forced or [])
        for what, ids in (("tokens", new), ("stop_tokens", stops), ("forced", forced)):
            bad = [t for t in ids if not 0 <= int(t) < self.cfg.vocab_size]
            if bad:
                raise ValueError(
                    f"request {rid!r}: {what} id {bad[0]} outside [0, {self.cfg.vocab_size})"
                )
        if len(stops) > self.spec.stop_width:
            raise ValueError(
                f"request {rid!r}: {len(stops)} stop tokens > stop_width={self.spec.stop_width}"
            )
        if max_new <= 0 or len(forced) > max_new:
            raise ValueError(f"request {rid!r}: max_new={max_new} must be > 0 and >= len(forced)")
        sampling = self.sampling if sampling is None else sampling
        try:
            check(sampling.temperature, sampling.top_k, sampling.top_p)
        except ValueError as e:
            raise ValueError(f"request {rid!r}: {e}") from None
        seed = sampling.seed
        if seed is not None and (not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**31):
            raise ValueError(f"request {rid!r}: seed must be an int in [0, 2**31), got {seed!r}")
        return new, int(max_new), stops, forced, sampling

    # -- running

    def _use_program(self, key: tuple) -> None:
        """Records a decode / prefill program; before its first use, makes room for its compiled
        kernels under the process's mapping cap (model/engine/map_limit.py)."""
        if key not in self.programs:
            ensure_room()
        self.programs.add(key)
        assert len(self.programs) <= self.max_programs, (self.programs, self.max_programs)

    def step(self, max_iterations: int = 256) -> list[Turn]:
        """Starts queued requests in free slots, prefills pending tokens, then decodes until some
        turn ends (or max_iterations). -> the turns that ended."""
        while self._queue and self._free:
            req = self._queue.popleft()
            req.slot, req.state = self._free.pop(0), "prefill"
        self._prefill_pending()
        running = [r for r in self._requests.values() if r.state == "running"]
        if not running:
            return []
        t0 = time.perf_counter()
        rows, kv = self._decode_shape(running)
        spec = self._decode_spec(running)
        recording = ("raw_logprobs",) if spec.top_logprobs >= 0 else ()
        self._use_program(("decode", len(rows), kv) + recording)
        with self._context():
            self.state = self._decode(
                self.cfg,
                spec,
                kv,
                self.params,
                self.version,
                jnp.int32(self.valid),
                self.state,
                jnp.asarray(rows),
                jnp.int32(max_iterations),
            )
        active, ngen, stopped = jax.device_get(
            (self.state.active, self.state.ngen, self.state.stopped)
        )
        self.timing["decode_s"] += time.perf_counter() - t0
        return [
            self._pause(req, int(ngen[req.slot]), bool(stopped[req.slot]))
            for req in running
            if not active[req.slot]
        ]

    def _decode_spec(self, running: list[_Request]) -> Spec:
        """The engine's spec, with raw log-prob recording switched off (top_logprobs = -1: a
        program that never computes them) unless a running request asked for them."""
        if self.spec.top_logprobs < 0 or any(r.logprobs for r in running):
            return self.spec
        return dataclasses.replace(self.spec, top_logprobs=-1)

    def raw_logprobs(self, rid, start: int, stop: int):
        """Raw log-probs of the tokens at absolute positions [start, stop) of a running or paused
        request submitted with logprobs=True (emitted tokens only: a request's j-th emitted token
        of its first turn is at len(prompt) + j). The model's own distribution, before temperature
        and top-k/top-p (vLLM's default, logprobs_mode='raw_logprobs'), over the valid ids.
        -> (the tokens' log-probs [n], top ids [n,W], their log-probs [n,W], largest first)."""
        req = self._requests.get(rid)
        if req is None or req.state not in ("running", "paused") or not req.logprobs:
            raise ValueError(f"raw_logprobs({rid!r}): not a live request submitted with logprobs")
        self.programs.add(("fetch_raw",))
        with self._context():
            raw, ids, lps = jax.device_get(_fetch_raw_jit(self.state, jnp.int32(req.slot)))
        return raw[start:stop], ids[start:stop], lps[start:stop]

    def _decode_shape(self, running: list[_Request]) -> tuple[np.ndarray, int]:
        """-> (rows [R], kv window) of a decode call over the running requests. R: the running
        count rounded up to a row bucket (a power of two, or B); R < B decodes only those slots
        (gathered, padded with B), so a step's cost follows the live requests, not the slots.
        Positions fed this call are < length - 1 + max_new (the turn's budget) for every slot.
        In place (R = B), copying a window in and out of the loop costs more than reading the
        whole cache unless the window is at most half of it (bench/RESULTS.md: 1.28x the time at
        1536 of 2048); gathered rows are copied anyway, so they always take the smallest window."""
        b = self.spec.slots
        if self.seq_split:  # every slot over the whole (split) cache (cache_split, __init__)
            return np.arange(b, dtype=np.int32), self.spec.cache_len
        kv = _bucket(max(r.length - 1 + r.max_new for r in running), self.kv_buckets)
        r = _bucket(len(running), self.r_buckets) if self.compact else b
        if r == b:
            kv = kv if 2 * kv <= self.spec.cache_len else self.spec.cache_len
            return np.arange(b, dtype=np.int32), kv
        rows = np.full((r,), b, np.int32)
        rows[: len(running)] = sorted(q.slot for q in running)
        return rows, kv

    def _pause(self, req: _Request, n: int, stopped: bool) -> Turn:
        """The ended turn of req (n tokens emitted), which is paused."""
        self.programs.add(("fetch_turn",))
        with self._context():
            turn = _fetch_turn_jit(self.state, jnp.int32(req.slot))
        toks, lps, vers = jax.device_get(turn)
        a = req.length
        req.length += n
        req.state = "paused"
        return Turn(
            req.rid,
            [int(t) for t in toks[a : a + n]],
            lps[a : a + n],
            vers[a : a + n],
            "stop" if stopped else "length",
            a,
        )

    def end_turn(self, rid) -> Turn:
        """Ends a running request's turn now, with the tokens emitted so far (finish_reason
        'stop'): a server's stop string was seen in them. The request is paused, as after a turn
        that ended by itself (extend / finish as usual)."""
        req = self._requests.get(rid)
        if req is None or req.state != "running":
            state = "unknown" if req is None else req.state
            raise ValueError(f"end_turn({rid!r}): request is {state}, not running")
        self.programs.add(("end_turns",))
        with self._context():
            self.state = self._end(self.state, jnp.asarray([req.slot], jnp.int32))
        return self._pause(req, int(np.asarray(self.state.ngen[req.slot])), True)

    def _prefill_pending(self) -> None:
        todo = [r for r in self._requests.values() if r.state == "prefill"]
        if not todo:
            return
        t0 = time.perf_counter()
        by_t = collections.defaultdict(list)
        for req in todo:
            fresh = req.length == 0
            seq = (
                req.new if fresh else [None] + req.new
            )  # None: the pending token, already on device
            n_seq = len(seq) + len(req.forced)
            budget = self.spec.cache_len - req.length - len(req.new)  # positions left to emit into
            if budget < 1:
                raise ValueError(
                    f"request {req.rid!r}: {req.length + len(req.new)} tokens leave no room in the "
                    f"cache of {self.spec.cache_len}"
                )
            req.max_new = min(req.max_new, budget)
            if len(req.forced) > req.max_new:
                raise ValueError(f"request {req.rid!r}: forced tokens exceed the cache")
            by_t[_bucket(n_seq, self.t_buckets)].append(req)
        for t, reqs in sorted(by_t.items()):
            for i in range(0, len(reqs), self.spec.slots):
                self._prefill_group(reqs[i : i + self.spec.slots], t)
        self.timing["prefill_s"] += time.perf_counter() - t0

    def _prefill_group(self, reqs: list[_Request], t: int) -> None:
        r = _bucket(len(reqs), self.r_buckets)
        b, st_w = self.spec.slots, self.spec.stop_width
        rows = np.full((r,), b, np.int32)
        seq = np.zeros((r, t), np.int32)
        start, n_seq, n_feed = (np.zeros((r,), np.int32) for _ in range(3))
        max_new, nforced = np.ones((r,), np.int32), np.zeros((r,), np.int32)
        stops = np.full((r, st_w), -1, np.int32)
        temp, top_p = np.zeros((r,), np.float32), np.ones((r,), np.float32)
        top_k, seeds, turns = (np.zeros((r,), np.int32) for _ in range(3))
        pending = np.asarray(self.state.tok) if any(q.length for q in reqs) else None
        for i, req in enumerate(reqs):
            fresh = req.length == 0
            head = [] if fresh else [int(pending[req.slot]) if req.pending is None else req.pending]
            req.pending = None
            ids = head + req.new + req.forced
            rows[i], seq[i, : len(ids)], n_seq[i] = req.slot, ids, len(ids)
            start[i] = 0 if fresh else req.length - 1
            n_feed[i] = len(head) + len(req.new) - 1
            max_new[i], nforced[i] = req.max_new, len(req.forced)
            stops[i, : len(req.stops)] = req.stops
            sp = req.sampling
            temp[i], top_k[i], top_p[i] = sp.temperature, sp.top_k, sp.top_p
            seeds[i], turns[i] = req.seed, req.turns
            req.turns += 1
            req.length += len(req.new)
            req.state, req.new = "running", []
        kv = _bucket(int((start + n_seq).max()), self.kv_buckets)  # the positions written
        kv = self.spec.cache_len if self.seq_split else kv
        self._use_program(("prefill", r, t, kv))
        with self._context():
            self.state = self._prefill(
                self.cfg,
                self.spec,
                kv,
                self.params,
                self.state,
                jnp.asarray(rows),
                jnp.asarray(seq),
                jnp.asarray(start),
                jnp.asarray(n_seq),
                jnp.asarray(n_feed),
                tuple(
                    jnp.asarray(x)
                    for x in (max_new, nforced, stops, temp, top_k, top_p, seeds, turns)
                ),
            )

"""RL's batch source for the one trainer (train/trainer.py): rollout store -> groups -> batch.

    trainer.train(config, workdir, run=<RL loss>, source=RLBatchSource(config, workdir, cfg))

Per step the source picks the next groups from the rollout store (arrival order; the staleness
and dynamic-sampling rules below), collates them into this host's rows (rl/learning/batch.py), adds
the reference logprobs on the trainer's mesh when the KL term is on (a jitted, sharded pre-step),
and after the step publishes the new params to the weight store, appends (step, groups) to
<workdir>/journal.jsonl and tells samplers its progress (backpressure: `progress_of`, groups
settled; a group read but waiting for its batch still counts as ahead of the trainer).

Exactly-once: the source's state (its JSON lives in the Orbax checkpoint's data slot, beside the
TrainState) is the pool order (single epoch; task j of the order is group id f'{j:06d}') and the
ids of the groups already trained, dropped or counted. After a SIGKILL the trainer restores both:
steps after the checkpoint are lost with their params, so their groups are trained again, once;
every other group is skipped. Groups read but not yet trained are not in the state: after a
restart they are read again.

Staleness (the bound: rl/learning/staleness.py): a group whose oldest policy token is more than
`rl.max_staleness` versions behind the trainer's version when its batch forms is dropped (counted).

Several trainer processes (jax.distributed): process 0 alone reads the store's listing and
decides (selection, books); the decision is broadcast, so every process holds the same books
and reads the same groups, and each collates the whole batch and keeps its own rows. Every
process writes its own shards of the weights; process 0 alone writes their manifest, the journal
and progress, and runs the samplers.
"""

from __future__ import annotations

import json
import os
import time

import jax
import numpy as np

from rl.episodes import timeline
from rl.episodes.episode_metrics import episode_metrics
from rl.episodes.records import reward_metrics
from rl.learning import batch as rb
from rl.learning.losses import model_apply, policy_forward, token_logprobs
from rl.learning.staleness import oldest_version, staleness, too_stale
from rl.sampling.rl_tasks import rl_task
from rl.sampling.run_config import pool_order
from rl.sampling.samplers import COUNTERS, acceptance
from rl.stores.store import RolloutStore, rollout_store_path
from rl.stores.weight_store import WeightWriter, weight_store_path
from train import trainer

LOG_KEYS = ("reward/mean", "staleness/max", "sync/fraction_of_full")
# rl.task values whose records carry the hidden tests' grade (rl/sampling/coding_sampler.py): their
# steps also log rl.episodes.episode_metrics.episode_metrics, and the progress line (and an eval
# gate) gets pass_rate.


class Books:
    """The source's state: pool order and group bookkeeping. Groups read but not yet trained
    (`pending`) are not saved: after a restart they are read again from the rollout store."""

    def __init__(self, order, consumed=(), dropped=(), zero_signal=0, skipped=0):
        self.order, self.consumed, self.dropped = list(order), list(consumed), list(dropped)
        self.zero_signal, self.skipped = zero_signal, skipped  # skipped: rl.curriculum's
        self.seen = set(self.consumed) | set(self.dropped)
        self.pending: list[tuple[str, list[dict]]] = []  # (group id, records), arrival order
        self.zero_since_batch = 0

    def to_json(self) -> dict:
        return {
            "order": self.order,
            "consumed": self.consumed,
            "dropped": self.dropped,
            "zero_signal": self.zero_signal,
            "skipped": self.skipped,
        }

    @classmethod
    def from_json(cls, d: dict) -> Books:
        # 'skipped' is absent in checkpoints from before rl.curriculum
        return cls(d["order"], d["consumed"], d["dropped"], d["zero_signal"], d.get("skipped", 0))

    def unfinished(self) -> bool:
        return len(self.seen) < len(self.order) or bool(self.pending)


def _no_signal(group: list[dict]) -> bool:
    return len({round(float(r["reward"]), 9) for r in group}) == 1  # zero advantage everywhere


def select(store, books: Books, rl, version: int):
    """-> (records to train, their group ids, stats) once a batch is ready, else None.

    New groups are read in arrival order. An empty group (a task rl.curriculum skipped, or one
    whose every episode the driver dropped) is counted in `skipped` and settled, never trained. A
    group whose rewards are all equal carries no signal: counted, and with rl.dynamic_sampling
    never trained: the batch waits for further groups until it holds rl.groups_per_batch groups
    with signal (DAPO's dynamic sampling; only the pool's last batch may be smaller). A group
    whose oldest policy token is more than rl.max_staleness versions behind `version` when its
    batch forms is dropped (counted)."""
    for g in store.list():
        if g in books.seen:
            continue
        books.seen.add(g)
        group = store.get(g)
        if not group:  # rl/sampling/curriculum.py skipped it (or every episode of it was dropped)
            books.skipped += 1
            books.consumed.append(g)
            continue
        if _no_signal(group):
            books.zero_signal += 1
            books.zero_since_batch += 1
            if rl.dynamic_sampling:
                books.consumed.append(g)  # read and settled: never trained, never read again
                continue
        books.pending.append((g, group))
    fresh = []
    for g, group in books.pending:
        if too_stale(version, oldest_version(group), rl.max_staleness):
            books.dropped.append(g)
        else:
            fresh.append((g, group))
    books.pending = fresh
    need = rl.groups_per_batch
    last = len(books.seen) == len(books.order)  # no more groups will come
    if not books.pending or (len(books.pending) < need and not last):
        return None
    take, books.pending = books.pending[:need], books.pending[need:]
    recs, ids, stal = [], [], []
    for g, group in take:
        books.consumed.append(g)
        recs += group
        ids.append(g)
        stal.append(max(staleness(version, oldest_version(group)), 0))
    stats = {"staleness": stal, "zero_signal": books.zero_since_batch}
    books.zero_since_batch = 0
    return recs, ids, stats


def progress_of(books: Books, version: int) -> dict:
    """What samplers' backpressure reads (rl/sampling/sampler_process.py): `consumed` counts the
    groups settled (trained, dropped as stale, zero-signal under dynamic sampling, skipped), not the
    ones read into `pending` and waiting for a batch, so a sampler sees the trainer's read-ahead
    as work still ahead of it (counting read groups let `pending` grow to 8-14 groups past
    max_ahead=6 and staleness drop a third of the pool: issue 44). No deadlock: while a batch
    waits, pending < groups_per_batch, and rl/learning/loop.py's resolve() requires max_ahead >=
    groups_per_batch + groups_per_call - 1, so a sampler can always write its next call."""
    return {
        "consumed": len(books.seen) - len(books.pending),
        "read": len(books.seen),
        "version": version,
    }


def graded(recs) -> bool:
    """Whether the records carry the hidden tests' grade (coding episodes; the toy tasks' records
    have a reward only)."""
    return bool(recs) and all("tests_total" in r for r in recs)


def step_metrics(recs, stats, train_metrics, sync, dt):
    """Host scalars of one RL step: the reward and its parts (rl.episodes.records.reward_metrics, as
    rollout summaries report them), staleness, throughput, weight-sync bytes, and for graded
    records the episode metrics of rl.episodes.episode_metrics.episode_metrics (pass rate, partial
    credit, tokens, calls, turns, malformed rates: the agentic suite's and the benchmarks'
    definition).
    Episode means count each chain once (rl/episodes/records.py); token counts take every record."""
    m = {k: float(v) for k, v in train_metrics.items()}
    m.update(reward_metrics(recs))
    if graded(recs):
        episode = episode_metrics(recs)
        episode.pop("reward", None)  # reward/mean above, from the same records
        m.update({k: float(v) for k, v in episode.items()})
    st = np.asarray(stats["staleness"] or [0])
    m.update({"staleness/max": float(st.max()), "staleness/mean": float(st.mean())})
    for b in range(4):
        m[f"staleness/hist_{b}"] = float(np.sum(st == b) if b < 3 else np.sum(st >= 3))
    m["zero_signal_groups"] = float(stats["zero_signal"])
    m["episode_len"] = float(np.mean([len(r["tokens"]) for r in recs])) if recs else 0.0
    pol = sum(int(np.sum(r["mask"])) for r in recs)
    m["trained_tokens_per_s"] = pol / max(dt, 1e-9)
    # Each record carries its group's share of the play call's wall time: count it once per group.
    shares = {r.get("group_id"): r.get("sample_seconds", 0.0) for r in recs}
    m["sampled_tokens_per_s"] = pol / max(sum(shares.values()), 1e-9)
    # Speculative decoding of the batch's play calls (each group's share of its call's counters,
    # once per group): acceptance and tokens per verify step, as the samplers log them.
    decode = {r.get("group_id"): r["decode"] for r in recs if r.get("decode")}
    if decode:
        m.update(acceptance({k: sum(d.get(k, 0) for d in decode.values()) for k in COUNTERS}))
    # Samplers' idle share over the batch's play calls: waiting for the trainer (backpressure)
    # or, inside a call, for sandboxes with nothing to decode (rl/episodes/timeline.py has the
    # spans).
    timing = {r.get("group_id"): r["timing"] for r in recs if r.get("timing")}
    if timing:
        t = {k: sum(d.get(k, 0.0) for d in timing.values()) for k in next(iter(timing.values()))}
        wall = t.get("wait_trainer_s", 0.0) + t.get("generate_s", 0.0)
        idle = t.get("wait_trainer_s", 0.0) + t.get("sandbox_wait_s", 0.0)
        m["idle/sampler"] = idle / max(wall, 1e-9)
    m["sync/bytes"], m["sync/seconds"] = float(sync["bytes"]), float(sync["seconds"])
    m["sync/fraction_of_full"] = sync["bytes"] / max(sync["full_bytes"], 1)  # 0: owns no shard
    return m


def truncate_journal(path: str, step: int) -> None:
    """Keeps the journal entries the restored state contains (steps <= step): the journal is then
    the history of the params the run holds, each group at most once."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        keep = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
    with open(path + ".tmp", "w") as f:
        f.writelines(keep)
    os.replace(path + ".tmp", path)


def broadcast_json(obj):
    """Process 0's JSON-able `obj`, on every process (one process: `obj` itself)."""
    if jax.process_count() == 1:
        return obj
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(obj).encode(), np.uint8) if jax.process_index() == 0 else None
    n = int(multihost_utils.broadcast_one_to_all(np.int32(0 if data is None else data.size)))
    buf = np.zeros(n, np.uint8)
    if data is not None:
        buf[:] = data
    return json.loads(np.asarray(multihost_utils.broadcast_one_to_all(buf)).tobytes())


def jit_ref_logprobs(cfg, rl, run, params_sh):
    """(ref_params, global batch) -> [B,T] logprobs of the targets under the frozen reference
    (replayed routing), jitted on the trainer's mesh; only built when kl_beta > 0."""
    from train.sharding import batch_sharding

    apply = model_apply(cfg)

    def ref(params, batch):
        out = policy_forward(apply, params, batch)  # the loss's own forward (rl/learning/losses.py)
        return token_logprobs(out.logits, batch["targets"], rl.temperature, rl.valid_vocab)[0]

    rows = batch_sharding(run.mesh)
    jitted = jax.jit(ref, in_shardings=(params_sh, rows), out_shardings=rows)

    def run_ref(params, batch):
        with trainer.mesh_context(run.mesh, run.rules):
            return jitted(params, batch)

    return run_ref


class RLBatchSource(trainer.BatchSource):
    """The trainer's batch source for RL (the module docstring)."""

    def __init__(self, config, workdir: str, cfg, *, start_samplers=None, log=print):
        self.config, self.rl, self.cfg = config, config.rl, cfg
        self.log_keys = LOG_KEYS + (("pass_rate",) if rl_task(self.rl.task).graded else ())
        if self.rl.speculative_k:
            self.log_keys += ("spec/acceptance", "spec/tokens_per_verify")
        self.workdir, self.log = workdir, log
        self.books = Books(pool_order(config.rl))
        self.primary = jax.process_index() == 0
        self.store = RolloutStore(rollout_store_path(config.rl, workdir))
        self.journal = os.path.join(workdir, "journal.jsonl")
        self.start_samplers = start_samplers  # (config, workdir) -> handle with .stop()
        self.samplers = None
        self.history: list[dict] = []  # one dict of host scalars per trained step
        self.ref = None  # (ref_fn, ref_params) when the KL term is on
        self.pending_step = None  # (records, ids, stats, t0) of the batch being trained
        self.times = {"waited": 0.0, "batch_at": None, "step_end": None}  # timeline and idle
        self.row_multiple = 1  # row lengths' divisor: set from the trainer's mesh in start()

    # -- state (the checkpoint's data slot)

    def get_state(self):
        return self.books.to_json()

    def set_state(self, state):
        self.books = Books.from_json(state)
        self.log(f"rl: resuming with {len(self.books.consumed)} groups trained")

    # -- lifecycle

    def start(self, run, state) -> None:
        self.version = int(jax.device_get(state.step))
        context = run.mesh.shape.get("context", 1)
        self.row_multiple = 2 * context if context > 1 else 1  # zig-zag chunks (config_check)
        timeline.start(self.workdir, f"trainer{jax.process_index()}", thread_only=True)
        if self.primary:
            os.makedirs(self.workdir, exist_ok=True)
            truncate_journal(self.journal, self.version)
            with open(os.path.join(self.workdir, "rl_config.json"), "w") as f:
                f.write(self.config.to_json())
            with open(os.path.join(self.workdir, "pool.json"), "w") as f:
                json.dump({"order": self.books.order}, f)
        # Every process writes its own shards (rl/stores/weight_store.py); process 0 the manifests.
        self.writer = WeightWriter(
            weight_store_path(self.rl, self.workdir),
            dtype=self.rl.weight_dtype,
            full_every=self.rl.full_every,
        )
        self.writer.rewind(self.version)  # (process 0 only)
        self._publish(state.params)
        self._progress()
        if self.rl.kl_beta:
            params_sh = jax.tree.map(lambda x: x.sharding, state.params)
            fresh = trainer.fresh_params(run, params_sh)
            ref_params = trainer.initial_params(run, fresh, params_sh, log=lambda _: None)
            self.ref = (jit_ref_logprobs(self.cfg, self.rl, run, params_sh), ref_params)
        if self.primary and self.start_samplers is not None:
            self.samplers = self.start_samplers(self.config, self.workdir)

    def close(self) -> None:
        if self.samplers is not None:
            self.samplers.stop()
            self.samplers = None
        timeline.stop()
        if self.primary and os.path.isdir(os.path.join(self.workdir, "timeline")):
            path = timeline.merge(self.workdir)
            idle = timeline.idle_fractions(timeline.read(self.workdir))
            self.log(
                f"rl: timeline {path}; idle " + ", ".join(f"{k} {v:.2f}" for k, v in idle.items())
            )

    # -- per step

    def next_batch(self, step: int):
        """Waits (polling the store) until a batch is ready; None when the pool is used up."""
        t0 = time.time()
        with timeline.span("wait_batch"):
            batch = self._wait_for_batch(step)
        self.times.update(waited=time.time() - t0, batch_at=time.time())
        return batch

    def _wait_for_batch(self, step: int):
        self.version = step
        reported = None
        while True:
            decision = None
            if self.primary and self.samplers is not None:
                self.samplers.revive(self.log)  # a killed sampler process comes back
            if self.primary:
                sel = select(self.store, self.books, self.rl, step)
                take = None
                if sel is not None:
                    self.pending_step = (*sel, time.perf_counter())
                    take = {"ids": sel[1], "stats": sel[2]}
                # no batch and none will come (pool used up), or the trainer's wall budget is
                # spent or SIGTERM arrived (give_up): the run ends here and saves
                finished = not self.books.unfinished() or self.give_up()
                decision = {"take": take, "done": sel is None and finished}
                if take is not None or decision["done"]:
                    # the books travel only with a decision (what a checkpoint after the step
                    # saves), not with every poll while the batch waits
                    decision["books"] = self.books.to_json()
            decision = broadcast_json(decision)
            if not self.primary and "books" in decision:
                self.books = Books.from_json(decision["books"])
            if decision["take"] is not None:
                return self._collate(decision["take"])
            if decision["done"]:
                return None
            settled = progress_of(self.books, self.version)["consumed"]
            if self.primary and reported != settled:
                # groups settled without a batch (zero-signal under dynamic sampling, stale,
                # skipped): samplers may produce that many more
                self._progress()
                reported = settled
            time.sleep(0.02)

    def _collate(self, take: dict) -> dict:
        if self.primary:
            recs = self.pending_step[0]
        else:
            recs = [r for g in take["ids"] for r in self.store.get(g)]
            self.pending_step = (recs, take["ids"], take["stats"], time.perf_counter())
        rows = self.config.train.batch_size
        seq_len = self.rl.max_tokens
        if self.rl.length_buckets:
            seq_len = rb.row_length(recs, seq_len, multiple=self.row_multiple)
        b = rb.collate(
            recs,
            seq_len=seq_len,
            rows=rows,
            n_moe_layers=self.cfg.num_moe_layers,
            k=self.cfg.num_experts_per_tok,
            malformed_adv=self.rl.malformed_adv,
            negative_scale=self.rl.negative_adv_scale,
            # the summary segment's entropy bonus: summary_toy only (rl/learning/batch.py)
            summary_entropy=(
                self.rl.summary_toy.entropy_bonus if self.rl.task == "summary_toy" else 0.0
            ),
        )
        per_host = rows // jax.process_count()
        lo = jax.process_index() * per_host  # this host's rows of the global batch
        return {k: v[lo : lo + per_host] for k, v in b.items()}

    def device_batch(self, batch: dict) -> dict:
        if self.ref is None:
            return batch
        ref_fn, ref_params = self.ref
        return dict(batch, ref_logprobs=ref_fn(ref_params, batch))

    def after_step(self, state, step: int, metrics: dict) -> dict:
        jax.block_until_ready(state.params)  # the step's compute ends inside its span
        rec, now = timeline.recorder(), time.time()
        if rec is not None and self.times["batch_at"] is not None:
            rec.add("train_step", self.times["batch_at"], now, {"step": step})
        with timeline.span("after_step", step=step):
            m = self._after_step(state, step, metrics)
        last, self.times["step_end"] = self.times["step_end"], time.time()
        if last is not None:  # the trainer's idle share since the previous step ended
            m["idle/trainer"] = self.times["waited"] / max(self.times["step_end"] - last, 1e-9)
        return m

    def _after_step(self, state, step: int, metrics: dict) -> dict:
        self.version = step
        with timeline.span("publish"):
            sync = self._publish(state.params)
        recs, ids, stats, t0 = self.pending_step
        m = step_metrics(recs, stats, jax.device_get(metrics), sync, time.perf_counter() - t0)
        m["dropped_groups_total"] = float(len(self.books.dropped))
        m["zero_signal_groups_total"] = float(self.books.zero_signal)
        m["curriculum_skipped_total"] = float(self.books.skipped)
        self.history.append({"step": step, **m})
        if self.primary:
            with open(self.journal, "a") as f:
                entry = {"step": step, "groups": ids, "staleness": stats["staleness"]}
                f.write(json.dumps(entry) + "\n")
            self._progress()
        return m

    def _publish(self, params) -> dict:
        """Every process writes the shards it owns of the global params (no gather); the stats
        are the whole store's on process 0, this process's elsewhere."""
        return self.writer.publish(params, self.version)

    def _progress(self) -> None:
        if self.primary:
            self.store.write_progress(progress_of(self.books, self.version))

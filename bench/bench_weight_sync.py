"""Weight sync on trained weights: bytes per version vs a full bf16 snapshot, changed elements,
publish/fetch seconds, to a local directory and to an S3 server; and the sampler's pause per
in-flight swap.

    python main.py --config=configs/default.py --config.train.steps=20 --workdir=/tmp/pre
    python main.py --mode=convert --config=configs/default.py --config.train.steps=20 \\
        --workdir=/tmp/pre
    python bench/bench_weight_sync.py --params /tmp/pre/export/params_20 [--lrs 1e-6,3e-6,1e-5]
        [--steps 3] [--s3] [--pause_swaps 6]
    # the pause alone (no deltas), e.g. for the small preset's export on a quiet host:
    python bench/bench_weight_sync.py --params /tmp/pre/export/params_20 --steps 0 \
        --pause_swaps 3 --pause_every 2 --pause_tokens 200
    # smoke: random-init tiny params (an export in /tmp), 1 step at one lr, bf16, 1 swap
    python bench/bench_weight_sync.py --tiny

Deltas: from the trained params, one RL train_step per version with configs/rl.py's trainer
(AdamW b2 0.99, no decay, clipping at 1, the RL loss) at each lr, on synthetic episodes (random
tokens and rewards, the sampler logprob set to the uniform one); each version is published to a
bfloat16 and a float32 store on each backend (full snapshot at version 0, deltas after) and
fetched by a reader that holds the previous version (what a sampler does); every fetch is checked
bitwise against the published params. Bytes are per version over the whole model; "vs bf16" divides
by a full bfloat16 snapshot (2 bytes x params). The 'mtp' column is what the MTP heads cost (the RL
loss never trains them).

Pause: an engine decodes 4 prompts while another thread publishes a new bf16 version every
--pause_every seconds; per swap it reports the poll + set_params time and the extra time of the
decode step after the swap (vs the median step), with the prefetching follower (download in the
background) and without it (the poll downloads). Prints markdown tables and the load average.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _records(rng, cfg, rows, seq):
    recs = []
    for i in range(rows):
        n = seq + 1
        recs.append(
            dict(
                tokens=rng.integers(1, cfg.vocab_size, size=n),
                mask=np.r_[np.zeros(n // 4), np.ones(n - n // 4)],
                logprobs=np.full(n, -np.log(cfg.vocab_size)),
                experts=rng.integers(
                    0, cfg.n_routed_experts, size=(cfg.num_moe_layers, n, cfg.num_experts_per_tok)
                ),
                reward=float(rng.random()),
                group_id=f"g{i // 4}",
            )
        )
    return recs


def _mtp_bytes(kv_root: str, version: int) -> int:
    """Bytes of the MTP heads' newest blobs in a local store's manifest of `version`."""
    with open(os.path.join(kv_root, "manifests", f"{version:012d}.json")) as f:
        m = json.load(f)
    return sum(
        s["chain"][-1]["bytes"]
        for p, leaf in m["leaves"].items()
        if p.startswith("mtp")
        for s in leaf["shards"]
    )


def _assert_bitwise(got: dict, want: dict, dtype: str) -> None:
    import ml_dtypes

    from rl.stores.weight_store import flatten

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    g, w = flatten(got), flatten(want)
    for k, x in w.items():
        assert np.array_equal(
            np.asarray(g[k]).view(np.uint8), np.asarray(x).astype(dt).view(np.uint8)
        ), k


def _stores(root: str, endpoint: str | None, dtypes) -> dict:
    """(backend, dtype) -> store string."""
    out = {("local", dt): os.path.join(root, dt) for dt in dtypes}
    if endpoint:
        from s3_fixture import kvstore_spec

        for dt in dtypes:
            out[("s3", dt)] = json.dumps(kvstore_spec(endpoint, f"{os.path.basename(root)}/{dt}/"))
    return out


def deltas(args, c, cfg, params0, endpoint) -> None:
    from rl.learning import batch as rb
    from rl.learning.loop import state_and_step
    from rl.stores.weight_store import WeightReader, WeightWriter

    n = sum(x.size for x in jax.tree.leaves(params0))
    bf16_full = 2 * n
    print(f"\n{n:,} params; a full bf16 snapshot is {bf16_full:,} bytes")
    print(
        "| lr | backend | sampler dtype | version | bytes | vs bf16 snapshot | changed elems "
        "| mtp bytes | publish s | fetch s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for lr in [float(x) for x in args.lrs.split(",")]:
        c.train.lr = lr
        state, step = state_and_step(c, params0)
        rng = np.random.default_rng(0)
        root = tempfile.mkdtemp(prefix=f"ws-{lr:g}-")
        pairs = {}
        for key, store in _stores(root, endpoint, args.dtypes.split(",")).items():
            w = WeightWriter(store, dtype=key[1], full_every=1000)
            w.publish(params0, 0)
            r = WeightReader(store)
            r.fetch()
            pairs[key] = (w, r)
        for v in range(1, args.steps + 1):
            b = rb.collate(
                _records(rng, cfg, args.rows, args.seq),
                seq_len=args.seq,
                rows=args.rows,
                n_moe_layers=cfg.num_moe_layers,
                k=cfg.num_experts_per_tok,
            )
            state, _ = step(state, {k: jnp.asarray(x) for k, x in b.items()})
            host = jax.device_get(state.params)
            for (backend, dt), (w, r) in pairs.items():
                st = w.publish(host, v)
                t0 = time.perf_counter()
                got, gv = r.fetch()
                fetch_s = time.perf_counter() - t0
                assert gv == v
                _assert_bitwise(got, host, dt)
                mtp = _mtp_bytes(os.path.join(root, dt), v) if backend == "local" else "-"
                print(
                    f"| {lr:g} | {backend} | {dt} | {v} | {st['bytes']:,} | "
                    f"{st['bytes'] / bf16_full:.4f} | {st['changed_frac']:.4f} | {mtp} | "
                    f"{st['seconds']:.2f} | {fetch_s:.2f} | {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )


def pause(args, cfg, params0) -> None:
    """Decode while versions arrive; per swap: poll + set_params, and the next step's extra."""
    from model.prompt_batch import PromptBatch
    from rl.sampling.sampler_process import to_engine
    from rl.stores.weight_store import Follower, WeightReader, WeightWriter

    print(
        "\n| follower | swaps | poll + set_params ms (median, max) | next step extra ms "
        "(median) | median decode step ms | fetch s (mean) | load |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    noise = np.random.default_rng(1)
    for prefetch in (True, False):
        store = tempfile.mkdtemp(prefix="pause-")
        w = WeightWriter(store, dtype="bfloat16", full_every=1000)
        w.publish(params0, 0)
        follower = Follower(WeightReader(store), cast=to_engine, prefetch=prefetch)
        params, version = follower.latest()
        prompts = [list(range(1 + i, 9 + i)) for i in range(4)]

        def new_batch(params, version, prompts=prompts):
            b = PromptBatch(cfg, params, prompts, args.pause_tokens, temperature=1.0)
            b.engine.set_params(params, version)
            return b.prefill()

        batch = new_batch(params, version)
        batch.step(2)  # compiled
        stop = threading.Event()

        def publish(w=w, stop=stop):
            v, p = 0, params0
            while not stop.wait(args.pause_every):
                v += 1
                p = jax.tree.map(lambda x: x + 1e-4 * noise.standard_normal(x.shape, np.float32), p)
                w.publish(p, v)

        t = threading.Thread(target=publish, daemon=True)
        t.start()
        steps, swaps, after = [], [], []
        while len(swaps) < args.pause_swaps:
            if batch.done:  # the prompts are decoded: the same shapes again (compiled)
                batch = new_batch(params, version)
            t0 = time.perf_counter()
            batch.step(1)
            jax.block_until_ready(batch.engine.state)
            steps.append(time.perf_counter() - t0)
            if swaps and len(after) < len(swaps):
                after.append(steps[-1])
            t0 = time.perf_counter()
            newer = follower.poll(version)
            if newer is not None:
                params, version = newer
                batch.engine.set_params(params, version)
                swaps.append(time.perf_counter() - t0)
        stop.set()
        t.join()
        med = float(np.median(steps))
        extra = [a - med for a in after] or [0.0]
        print(
            f"| {'prefetch' if prefetch else 'poll downloads'} | {len(swaps)} | "
            f"{1e3 * np.median(swaps):.1f}, {1e3 * max(swaps):.1f} | "
            f"{1e3 * np.median(extra):.1f} | "
            f"{1e3 * med:.1f} | {follower.fetch_seconds / max(follower.fetches, 1):.2f} | "
            f"{os.getloadavg()[0]:.1f} |",
            flush=True,
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="", help="exported params (model.export layout)")
    ap.add_argument("--steps", type=int, default=3, help="0 = skip the deltas")
    ap.add_argument("--lrs", default="1e-6,3e-6,1e-5")
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--s3", action="store_true", help="also publish to a SeaweedFS S3 server")
    ap.add_argument("--dtypes", default="bfloat16,float32", help="sampler dtypes")
    ap.add_argument("--pause_swaps", type=int, default=6, help="0 = skip the pause measurement")
    ap.add_argument("--pause_every", type=float, default=2.0)
    ap.add_argument("--pause_tokens", type=int, default=400)
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # the project; tests/s3_fixture.py
    from bench.common import parse_tiny, tiny_export

    tiny = dict(steps=1, lrs="1e-5", rows=4, seq=16, dtypes="bfloat16")
    args = parse_tiny(ap, dict(tiny, pause_swaps=1, pause_every=0.2, pause_tokens=8))
    if not args.params:
        if not args.tiny:
            ap.error("--params is required (an export, model.export layout) unless --tiny")
        args.params = tiny_export("tiny")
    from configs import rl as rl_config
    from model import export
    from rl.learning.loop import model_config

    c = rl_config.get_config()
    c.init_params_from = args.params
    c.rl.update(max_tokens=args.seq, group_size=4, groups_per_batch=args.rows // 4)
    c.trainer_devices = 1
    cfg = model_config(c)
    params0 = jax.device_get(export.load_params(args.params)[1])
    with contextlib.ExitStack() as stack:
        endpoint = None
        if args.s3:
            from s3_fixture import weed_server

            endpoint = stack.enter_context(weed_server())
        if args.steps:
            deltas(args, c, cfg, params0, endpoint)
    if args.pause_swaps:
        pause(args, cfg, params0)


if __name__ == "__main__":
    main()

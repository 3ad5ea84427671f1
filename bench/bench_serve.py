"""Serving throughput and latency: the OpenAI-compatible server (rl/serve: the one decode engine,
continuous batching) vs the same workload through transformers' `generate` in a loop (the
baseline a user would write: one request at a time), on the `small` preset with the same
weights, on CPU; then a hot swap under load.

    python bench/bench_serve.py [--levels 1,8,32] [--requests 8,16,32] [--new_tokens 32]
    python bench/bench_serve.py --levels 1 --requests 8 --all_slots --swap_clients 0  # before/after
    python bench/bench_serve.py --tiny   # smoke: tiny preset, 1 client, 2 requests of 4 tokens,
                                         # no transformers baseline (torch), no hot swap

Workload: closed loop, c concurrent clients (c in --levels) share a list of requests (prompts of
--prompt_len random byte ids, greedy, --new_tokens new tokens); each client sends its next
request when the previous one is answered. Ours: the `openai` client against uvicorn on loopback
(server in this process, --slots slots). Baseline: the same clients hand their requests to one
worker thread that runs `DeepseekV3ForCausalLM.generate` per request (weights: the JAX params
written with model.save_hf_checkpoint and read by transformers); a request's latency includes its
wait in that queue. The server's engine compiles every prefill row bucket first (`warm`), and
both sides warm up at each level (c requests: compilation of the
buckets that level meets, allocator). Prints requests/s, completion tokens/s, p50/p99 latency and
mean completion tokens per level (the server stops at <|end|>/<|eos|>, the baseline runs to
--new_tokens), with the load average.

--all_slots adds a second server whose engine decodes every slot at every step
(RolloutEngine(compact=False), the engine before it decoded only the live slots), measured in the
same run beside the default one: the before/after of decoding live rows only.

Hot swap (skipped with --swap_clients 0): at --levels' largest level, a new version is published and
promoted to the weight store in the middle of the run; every request must complete, and the versions
the responses report are counted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import queue
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bench.common import parse_tiny  # noqa: E402
from configs import serve as serve_config  # noqa: E402
from data.tokenizers import ByteTokenizer  # noqa: E402
from model import init_params, presets, save_hf_checkpoint  # noqa: E402

MODEL = "composer-small"
STOPS = []  # each started server's shutdown (rl/serve/server.py stop_threads)


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def closed_loop(send, prompts, clients: int) -> dict:
    """c clients draining `prompts`; send(prompt) -> (completion tokens, versions)."""
    todo, lock, lat, toks, versions, errors = list(prompts), threading.Lock(), [], [], set(), []

    def client():
        while True:
            with lock:
                if not todo:
                    return
                p = todo.pop()
            t0 = time.perf_counter()
            try:
                n, v = send(p)
            except Exception as e:  # counted: a dropped request is the thing to show
                errors.append(repr(e))
                continue
            lat.append(time.perf_counter() - t0)
            toks.append(n)
            versions.update(v)

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for f in [pool.submit(client) for _ in range(clients)]:
            f.result()
    wall = time.perf_counter() - t0
    return dict(
        rps=len(lat) / wall,
        tps=sum(toks) / wall,
        p50=float(np.percentile(lat, 50)) if lat else float("nan"),
        p99=float(np.percentile(lat, 99)) if lat else float("nan"),
        tokens=float(np.mean(toks)) if toks else 0.0,
        done=len(lat),
        errors=errors,
        versions=sorted(versions),
    )


def start_server(cfg, params, args, root: str, compact: bool = True):
    import openai

    from rl.serve.app import make_app
    from rl.serve.follow import PromotedFollower
    from rl.serve.server import build, start_http, stop_threads

    block = serve_config.get_config().serve
    block.update(
        model_name=MODEL, slots=args.slots, cache_len=args.cache_len, temperature=0.0,
        max_new_tokens=args.new_tokens, speculative_k=0, rate_per_s=0.0, max_concurrent=0,
        max_n=args.slots,
    )  # fmt: skip
    server = build(block, cfg, params, ByteTokenizer(), log_dir=os.path.join(root, "log"))
    server.loop.engine.compact = compact
    warm(server.loop.engine, args)
    server.loop.start()
    store = os.path.join(root, "weights")
    follower = PromotedFollower(store, server.loop, poll_s=0.1, log=lambda _: None).start()
    http, thread, port = start_http(make_app(server), "127.0.0.1", 0)
    # Joined before exit: a daemon thread left in JAX / tensorstore aborts the interpreter's exit
    STOPS.append(lambda: stop_threads(server, (http, thread), follower))
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0)

    def send(prompt):
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=args.new_tokens)
        return r.usage.completion_tokens, r.model_extra["params_versions"]

    return send, server


def warm(engine, args) -> None:
    """Compiles the programs any arrival pattern meets before timing: a prefill for every row
    bucket R (requests arriving together are prefilled together) and the decode loop. Under a
    closed loop arrivals stagger, and a program first met mid-run costs seconds of compilation."""
    for r in engine.r_buckets:
        for i in range(r):
            engine.submit(("warm", r, i), [1] * args.prompt_len, max_new=args.new_tokens)
        done = 0
        while done < r:
            for turn in engine.step():
                engine.finish(turn.request)
                done += 1


def hf_sender(folder: str, new_tokens: int):
    import torch
    from transformers import DeepseekV3ForCausalLM

    model = DeepseekV3ForCausalLM.from_pretrained(folder).eval()
    jobs: queue.Queue = queue.Queue()

    def worker():  # the loop a user would write: one generate per request
        while True:
            prompt, box, done = jobs.get()
            inp = torch.tensor([prompt], dtype=torch.long)
            with torch.no_grad():
                out = model.generate(inp, attention_mask=torch.ones_like(inp),
                                     max_new_tokens=new_tokens, do_sample=False)  # fmt: skip
            box.append(out.shape[1] - inp.shape[1])
            done.set()

    threading.Thread(target=worker, daemon=True).start()

    def send(prompt):
        box, done = [], threading.Event()
        jobs.put((prompt, box, done))
        done.wait()
        return box[0], [0]

    return send


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--requests", default="8,16,32", help="requests per level")
    ap.add_argument("--prompt_len", type=int, default=32)
    ap.add_argument("--new_tokens", type=int, default=32)
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--cache_len", type=int, default=128)
    ap.add_argument("--skip_hf", action="store_true")
    ap.add_argument("--swap_clients", type=int, default=32, help="0: no hot-swap run")
    ap.add_argument("--all_slots", action="store_true", help="also the every-slot engine")
    ap.add_argument("--preset", default="small")
    tiny = dict(levels="1", requests="2", prompt_len=8, new_tokens=4, slots=2, cache_len=64)
    args = parse_tiny(ap, dict(tiny, preset="tiny", skip_hf=True, swap_clients=0))
    levels = [int(x) for x in args.levels.split(",") if x]  # --levels= : only the hot swap
    counts = [int(x) for x in args.requests.split(",") if x]
    cfg = presets.get(args.preset)
    params = jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
    rng = np.random.default_rng(0)
    prompts = lambda n: [[int(t) for t in rng.integers(0, 256, args.prompt_len)] for _ in range(n)]
    root = tempfile.mkdtemp(prefix="bench_serve_")
    send, server = start_server(cfg, params, args, root)
    sides = {"server": send}
    if args.all_slots:
        sides["server_all_slots"] = start_server(
            cfg, params, args, os.path.join(root, "all"), compact=False
        )[0]
    if not args.skip_hf:
        save_hf_checkpoint(cfg, params, os.path.join(root, "hf"))
        sides["hf_generate_loop"] = hf_sender(os.path.join(root, "hf"), args.new_tokens)
    print(
        f"{args.preset} preset, prompt {args.prompt_len} + {args.new_tokens} new tokens, "
        f"greedy; {load()}"
    )
    for c, n in zip(levels, counts):
        for name, send in sides.items():
            closed_loop(send, prompts(c), c)  # warm-up: compiles the buckets this level meets
            r = closed_loop(send, prompts(n), c)
            print(
                f"  c={c:2d} {name:17s} {r['rps']:6.2f} req/s {r['tps']:7.1f} tok/s  p50 "
                f"{r['p50']:6.2f} s  p99 "
                f"{r['p99']:6.2f} s  {r['tokens']:.1f} tok/req  {r['done']}/{n} done  ({load()})",
                flush=True,
            )
    if args.swap_clients:
        hot_swap(
            cfg,
            sides["server"],
            server,
            os.path.join(root, "weights"),
            prompts(4 * args.swap_clients),
            args.swap_clients,
        )
    for stop in STOPS:
        stop()


def hot_swap(cfg, send, server, store: str, prompts, clients: int) -> None:
    """The new version is published before the load starts (writing 100M params takes seconds
    here) and promoted 2 s into it; the server's follower then fetches it and the engine thread
    swaps it in between decode steps while every slot is busy."""
    from rl.stores.weight_store import Promotions, WeightWriter

    t0 = time.perf_counter()
    WeightWriter(store, dtype="float32").publish(
        jax.device_get(init_params(cfg, jax.random.PRNGKey(1))), 1
    )
    print(
        f"  published version 1 in {time.perf_counter() - t0:.1f} s (not promoted yet)", flush=True
    )
    marks = {}

    def swap():
        time.sleep(2.0)  # mid-run: requests in flight on every slot
        Promotions(store).promote(1)
        marks["promoted"] = time.perf_counter()
        while server.loop.version != 1 and time.perf_counter() < marks["promoted"] + 300:
            time.sleep(0.01)
        if server.loop.version == 1:
            marks["served"] = time.perf_counter()

    t = threading.Thread(target=swap)
    t.start()
    r = closed_loop(send, prompts, clients)
    t.join()
    seen = marks.get("served", float("nan")) - marks["promoted"]
    print(
        f"hot swap under load (c={clients}, {len(prompts)} requests, version 1 promoted 2 s in): "
        f"{r['done']}/{len(prompts)} completed, {len(r['errors'])} errors, versions seen "
        f"{r['versions']}, p50 {r['p50']:.2f} s p99 {r['p99']:.2f} s; promoted -> serving "
        f"{seen:.1f} s, of which set_params on the engine thread "
        f"{(server.loop.swap_seconds or [float('nan')])[-1]:.2f} s "
        f"({load()})"
    )


if __name__ == "__main__":
    main()

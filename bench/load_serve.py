"""Load test of the exposed server (issue 54): `main.py --mode=serve` in a child process on
loopback with API keys, driven by the official `openai` client, then SIGTERM under load.

    python bench/load_serve.py                      # small preset, 16 clients x 4 keys, 30 s
    python bench/load_serve.py --tiny               # what tests/test_serve.py runs (a few s)

Load: --clients threads, client c on key c % --keys, each sending its next request when the last
is answered until --duration seconds or --max_requests requests in all (both bounds: it stops by
itself), after --warm_s seconds of the same load unmeasured (compilation of the engine's buckets). A
seeded mix: chat or completion, streamed or not; a share --invalid of them is bad on purpose (a
wrong key: 401, max_tokens over the server's limit: 400, an unknown model: 404, a body over the size
limit: 413). Rate and concurrency limits are the server's defaults, so a client may meet 429
(counted with the rest). Reported: requests/s, completion tokens/s, p50/p99 latency of the answered
requests, responses by status, and the accepted (200) responses missing from the interaction log
(read back from disk: must be 0).

SIGTERM: --sigterm_clients clients each start a streamed request (max_tokens --sigterm_tokens)
and the server gets SIGTERM once all are streaming. Each request must end completed (its
finish_reason) or with a clean error (a refused connection, an HTTP error, an SSE error chunk),
never cut silently; the server must exit 0 without a C++ abort, its log intact (no torn record)
and holding every completed response. The last line printed is the result as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "composer-load"
MAX_TOKENS_LIMIT = 64  # the server's max_tokens_limit here (the 400 case asks one more)


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(args, root: str, keys: list[str]):
    """Exports the preset's params and starts main.py --mode=serve with the keys in an
    environment variable (never on the command line). -> (process, port)."""
    import jax

    from model import init_params, presets
    from model.export import save_params

    cfg = presets.get(args.preset)
    save_params(
        os.path.join(root, "params"), cfg, jax.device_get(init_params(cfg, jax.random.PRNGKey(0)))
    )
    port = free_port()
    env = dict(os.environ, LOAD_SERVE_KEYS=",".join(keys))
    cmd = [sys.executable, "main.py", "--mode=serve", f"--params={root}/params", f"--port={port}",
           f"--workdir={root}", "--config=configs/serve.py", f"--config.serve.model_name={MODEL}",
           "--config.serve.api_keys=env:LOAD_SERVE_KEYS", f"--config.serve.slots={args.slots}",
           f"--config.serve.cache_len={args.cache_len}", "--config.serve.follow=False",
           f"--config.serve.max_tokens_limit={MAX_TOKENS_LIMIT}", "--config.serve.temperature=1.0",
           "--config.serve.max_body_bytes=65536"]  # fmt: skip
    err = open(os.path.join(root, "server.err"), "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {open(err.name).read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not answer /health in 300 s")


def one_request(client, kind: str, rng, max_tokens: int):
    """Sends one request of `kind` -> (status, response id | None, completion tokens)."""
    import openai

    chat = rng.random() < 0.5
    stream = rng.random() < 0.5
    kw = dict(model=MODEL, max_tokens=max_tokens)
    if kind == "too_many_tokens":
        kw["max_tokens"] = MAX_TOKENS_LIMIT + 1
    elif kind == "unknown_model":
        kw["model"] = "gpt-x"
    text = f"def f{rng.integers(1000)}(x):" if kind != "too_large" else "x" * 70000
    try:
        if chat:
            out = client.chat.completions.create(messages=[{"role": "user", "content": text}],
                                                 stream=stream, **kw)  # fmt: skip
        else:
            out = client.completions.create(prompt=text, stream=stream, **kw)
        if not stream:
            return 200, out.id, out.usage.completion_tokens
        rid, n, reason = None, 0, None
        for chunk in out:
            rid = chunk.id
            for c in chunk.choices:
                n += 1 if (c.delta.content if chat else c.text) else 0
                reason = c.finish_reason or reason
        return (200, rid, n) if reason else ("cut", rid, n)
    except openai.APIStatusError as e:
        return e.status_code, None, 0
    except openai.APIConnectionError:
        return "connection", None, 0


INVALID = ("wrong_key", "too_many_tokens", "unknown_model", "too_large")


def run_load(port: int, keys: list[str], args, seconds: float, max_requests: int, seed: int):
    """The closed loop -> {status: count}, latencies of 200s, tokens, accepted ids, wall."""
    import openai

    base = f"http://127.0.0.1:{port}/v1"
    lock, out = threading.Lock(), dict(status={}, lat=[], tokens=0, ids=[], sent=0)
    t_end = time.monotonic() + seconds

    def client(c: int):
        rng = np.random.default_rng(seed * 1000 + c)
        good = openai.OpenAI(base_url=base, api_key=keys[c % len(keys)], max_retries=0)
        bad = openai.OpenAI(base_url=base, api_key="sk-not-a-key-000", max_retries=0)
        while time.monotonic() < t_end:
            with lock:
                if out["sent"] >= max_requests:
                    return
                out["sent"] += 1
            kind = rng.choice(INVALID) if rng.random() < args.invalid else "ok"
            t0 = time.perf_counter()
            status, rid, n = one_request(bad if kind == "wrong_key" else good, kind, rng,
                                         args.max_tokens)  # fmt: skip
            with lock:
                out["status"][str(status)] = out["status"].get(str(status), 0) + 1
                if status == 200:
                    out["lat"].append(time.perf_counter() - t0)
                    out["tokens"] += n
                    out["ids"].append(rid)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["wall"] = time.perf_counter() - t0
    return out


def logged_ids(log_dir: str) -> tuple[set, dict]:
    from rl.serve.interaction_log import read_log

    stats: dict = {}
    ids = {r["id"] for _, r in read_log(log_dir, stats=stats) if r.get("kind") == "exchange"}
    return ids, stats


def sigterm_under_load(proc, port: int, keys: list[str], args) -> dict:
    """Streams in flight on every client (each has its first chunk, or 300 s passed), then
    SIGTERM: -> outcomes, the exit code and the seconds from the signal to the exit."""
    import openai

    base = f"http://127.0.0.1:{port}/v1"
    outcomes, lock, streaming = [], threading.Lock(), threading.Semaphore(0)

    def client(c: int):
        cl = openai.OpenAI(base_url=base, api_key=keys[c % len(keys)], max_retries=0)
        rid, reason, first = None, None, True
        try:
            stream = cl.completions.create(model=MODEL, prompt=f"slow {c}", stream=True,
                                           max_tokens=args.sigterm_tokens)  # fmt: skip
            for chunk in stream:
                if first:
                    first = False
                    streaming.release()
                rid = chunk.id
                reason = (chunk.choices[0].finish_reason if chunk.choices else None) or reason
            result = "completed" if reason else "cut"
        except (openai.APIConnectionError, openai.APIStatusError) as e:
            result = f"clean error ({type(e).__name__})"
        except Exception as e:  # anything else is what the test must see
            result = f"unclean ({type(e).__name__}: {e})"
        if first:
            streaming.release()
        with lock:
            outcomes.append((result, rid))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.sigterm_clients)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 300
    for _ in threads:  # every client streaming (or failed): all in flight
        streaming.acquire(timeout=max(0.0, deadline - time.monotonic()))
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    for t in threads:
        t.join(timeout=300)
    code = proc.wait(timeout=300)
    return dict(outcomes=outcomes, exit=code, shutdown_s=time.perf_counter() - t0)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="the suite's few-second run")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (a bound)")
    ap.add_argument("--max_requests", type=int, default=2000, help="requests in all (a bound)")
    ap.add_argument("--invalid", type=float, default=0.1, help="share of bad requests")
    ap.add_argument("--warm_s", type=float, default=60.0, help="warm-up load (0: 2 per client)")
    ap.add_argument("--max_tokens", type=int, default=16)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--cache_len", type=int, default=128)
    ap.add_argument("--sigterm_clients", type=int, default=8)
    ap.add_argument("--sigterm_tokens", type=int, default=48)
    args = ap.parse_args(argv)
    if args.tiny:
        args.preset, args.clients, args.keys, args.duration, args.invalid = "tiny", 4, 2, 3.0, 0.3
        args.warm_s = 0.0
        args.max_requests, args.max_tokens, args.slots, args.cache_len = 60, 6, 4, 64
        args.sigterm_clients, args.sigterm_tokens = 3, 40
    keys = [f"sk-load-{i}-{os.urandom(8).hex()}" for i in range(args.keys)]
    root = tempfile.mkdtemp(prefix="load_serve_")
    proc, port = start_server(args, root, keys)
    try:
        # Warm-up, not measured: the engine compiles a program per prefill (rows, length) and
        # decode (rows, cache length) bucket the first time an arrival pattern meets it
        warm = run_load(port, keys, args, args.warm_s or 120.0,
                        10**9 if args.warm_s else 2 * args.clients, seed=1)  # fmt: skip
        before = load()
        r = run_load(port, keys, args, args.duration, args.max_requests, seed=0)
        after = load()
        ids, _ = logged_ids(os.path.join(root, "interactions"))
        missing = [i for i in warm["ids"] + r["ids"] if i not in ids]
        lat = np.asarray(r["lat"] or [np.nan])
        answered = sum(r["status"].values())
        print(f"{args.preset} preset, {args.clients} clients over {args.keys} keys, "
              f"{args.duration:g} s / {args.max_requests} requests bound, {args.invalid:.0%} "
              f"invalid; uptime {before} before, {after} after")  # fmt: skip
        print(f"  {answered} requests in {r['wall']:.1f} s: {answered / r['wall']:.2f} req/s, "
              f"{len(r['lat']) / r['wall']:.2f} accepted/s, {r['tokens'] / r['wall']:.1f} tok/s; "
              f"p50 {np.percentile(lat, 50):.3f} s p99 {np.percentile(lat, 99):.3f} s; by status "
              f"{dict(sorted(r['status'].items()))}; accepted missing from the log: "
              f"{len(missing)} of {len(warm['ids']) + len(r['ids'])}", flush=True)  # fmt: skip
        term = sigterm_under_load(proc, port, keys, args)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = open(os.path.join(root, "server.err")).read()
    ids, stats = logged_ids(os.path.join(root, "interactions"))
    done = [rid for res, rid in term["outcomes"] if res == "completed"]
    kinds = sorted({res for res, _ in term["outcomes"]})
    print(f"  SIGTERM with {args.sigterm_clients} streams in flight: {kinds}; exit {term['exit']} "
          f"in {term['shutdown_s']:.1f} s; torn log records {stats.get('torn', 0)}; completed "
          f"missing from the log {sum(rid not in ids for rid in done)}", flush=True)  # fmt: skip
    result = dict(
        status=r["status"], accepted=len(r["lat"]), wall_s=r["wall"],
        p50_s=float(np.percentile(lat, 50)), p99_s=float(np.percentile(lat, 99)),
        missing=len(missing), sigterm_outcomes=[res for res, _ in term["outcomes"]],
        exit=term["exit"], torn=stats.get("torn", 0),
        completed_missing=sum(rid not in ids for rid in done),
        abort="terminate called" in err, keys_in_stderr=any(k in err for k in keys),
    )  # fmt: skip
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

"""Wiring for `main.py --mode=serve` (configs/serve.py): params -> engine -> engine loop ->
FastAPI app on uvicorn, the interaction log, and the promoted-version follower.

    python main.py --mode=serve --params=DIR --port=8000 [--workdir=W]

Interactions go to <workdir>/interactions (serve.log_dir), and the server follows the promoted
versions of <workdir>/weights (serve.weight_store), where `--mode=rl --config=configs/realtime.py`
with the same --workdir publishes them.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from rl.serve import protocol as pr
from rl.serve.app import Server, make_app
from rl.serve.auth import Keys, Limiter, check_bind, load_keys
from rl.serve.engine_loop import EngineLoop
from rl.serve.follow import PromotedFollower
from rl.serve.interaction_log import InteractionLog


def serve_paths(s, workdir: str) -> tuple[str, str]:
    """(interaction log dir, weight store) of a serve block ('' = under the workdir)."""
    return (
        s.log_dir or os.path.join(workdir, "interactions"),
        s.weight_store or os.path.join(workdir, "weights"),
    )


POSITIVE = ("slots", "cache_len", "max_new_tokens", "max_body_bytes", "max_messages", "max_tools",
            "max_stop", "max_n", "max_tokens_limit", "burst", "feedback_window_s")  # fmt: skip
AT_LEAST_0 = ("rate_per_s", "max_concurrent", "request_timeout_s", "shutdown_grace_s")


def check_block(s) -> None:
    """One-line ConfigError for a serve block's bad limits (before anything is loaded)."""
    from model.errors import ConfigError

    for name in POSITIVE + AT_LEAST_0:
        x = s[name]
        number = isinstance(x, (int, float)) and not isinstance(x, bool)
        if not number or (x <= 0 if name in POSITIVE else x < 0):
            bound = "> 0" if name in POSITIVE else ">= 0"
            raise ConfigError(f"serve.{name}={x!r}: must be a number {bound}")
    budget = s.get("tool_output_budget", 0)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ConfigError(f"serve.tool_output_budget={budget!r}: must be an integer >= 0 (0 = off)")
    if s.max_stop > 4:
        raise ConfigError(f"serve.max_stop={s.max_stop}: OpenAI's API takes at most 4")


def build(s, cfg, params, tok, *, log_dir: str, params_version: int = 0, keys: Keys | None = None):
    """-> the Server of the `serve` block `s` (configs/serve.py's fields, all of them), its
    engine loop not started yet. keys: the API keys (rl/serve/auth.py; None = none)."""
    from model.engine_config import EngineConfig, build_engine

    check_block(s)
    # top_logprobs: computed only while a request asks (engine docstring)
    ec = EngineConfig.from_block(s, cfg, stop_width=2, top_logprobs=pr.MAX_TOP_LOGPROBS)
    # params: cast to the engine's decode dtype and placed by the engine
    engine = build_engine(
        cfg, params, ec, valid_vocab=tok.vocab_size, params_version=params_version
    )
    server = Server(
        tok=tok,
        loop=None,
        log=InteractionLog(log_dir, max_bytes=s.log_max_bytes),
        model=s.model_name,
        temperature=s.temperature,
        cache_len=engine.spec.cache_len,
        max_new_default=s.max_new_tokens,
        max_n=min(s.max_n, s.slots),  # one slot per choice
        keys=keys or Keys({}),
        limiter=Limiter(rate_per_s=s.rate_per_s, burst=s.burst, max_concurrent=s.max_concurrent),
        limits=pr.Limits(s.max_messages, s.max_tools, s.max_stop, s.max_tokens_limit),
        max_body_bytes=s.max_body_bytes,
        metrics_open=s.metrics_open,
        feedback_window_s=s.feedback_window_s,
        tool_budget=s.get("tool_output_budget", 0),
    )
    server.loop = EngineLoop(
        engine,
        stream_every=s.stream_every,
        on_tokens=server.metrics.emitted,
        timeout_s=s.request_timeout_s,
    )
    return server


def start_http(app, host: str, port: int):
    """uvicorn on a thread (tests, benches); port 0 = a free one. -> (uvicorn.Server, thread,
    port), serving when this returns."""
    import uvicorn

    http = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=http.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not http.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"serve: uvicorn did not start on {host}:{port}")
        time.sleep(0.02)
    return http, thread, http.servers[0].sockets[0].getsockname()[1]


def _exit_on_signals() -> None:
    """SIGTERM / SIGINT raise SystemExit(0). uvicorn swaps in its own handlers while it serves
    (a signal then shuts it down gracefully), and afterwards restores these and re-raises the
    signal it got: with the default SIGTERM action that killed the process (exit -15) before
    `serve`'s cleanup, so the engine, follower and log were never stopped; this way the cleanup
    runs and the exit is 0. Before uvicorn starts (loading params) a signal exits the same way."""

    def stop(signum, frame):
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def stop_threads(server: Server, http=None, follower=None) -> None:
    """Stops and joins every thread that runs JAX or tensorstore (uvicorn on a thread, the
    follower, the engine loop), then closes the log. A daemon thread still inside one of them at
    interpreter exit is killed there by CPython's finalization (pthread_exit unwinding C++
    frames), which aborts the process: 'terminate called without an active exception'."""
    if http is not None:
        http[0].should_exit = True
        http[1].join(timeout=30)
    if follower is not None:
        follower.stop()
    server.loop.stop()
    server.log.close()


def serve(config, params_dir: str, workdir: str, port: int = 0) -> None:
    """--mode=serve: blocks until SIGTERM / ctrl-C, then shuts down cleanly (exit 0)."""
    import uvicorn

    from data.export_tokenizer import tokenizer_for_export
    from model.errors import InputError
    from model.export import load_params

    s = config.serve
    _exit_on_signals()
    check_block(s)
    keys = load_keys(s.api_keys)  # before the params: a refusal costs nothing
    check_bind(s.host, keys, allow_open=s.allow_open)
    if not params_dir:
        raise InputError("--mode=serve needs --params=DIR (an exported params checkpoint)")
    try:
        cfg, params = load_params(params_dir)
        cfg = cfg.replace(decode_dtype=config.decode_dtype)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(f"--params={params_dir}: {' '.join(str(e).split())}") from None
    try:  # serve.tokenizer, else the export's own (data/export_tokenizer.py)
        tok = tokenizer_for_export(params_dir, s.tokenizer, cfg.vocab_size)
    except ValueError as e:
        raise InputError(f"serve.tokenizer: {e} (leave it unset to use the export's)") from None
    log_dir, store = serve_paths(s, workdir)
    server = build(s, cfg, params, tok, log_dir=log_dir, keys=keys)
    server.loop.start()
    follower = PromotedFollower(store, server.loop, poll_s=s.poll_s).start() if s.follow else None
    auth = f"{len(keys.hashes)} API keys" if not keys.open else "no API keys"
    print(
        f"serving {s.model_name} on http://{s.host}:{port or s.port} ({auth}; log {log_dir}, "
        f"weights {store})",
        flush=True,
    )
    try:  # SIGTERM: uvicorn stops accepting, lets in-flight requests finish (a bound), returns
        uvicorn.run(make_app(server), host=s.host, port=port or s.port, log_level="warning",
                    timeout_graceful_shutdown=s.shutdown_grace_s or None)  # fmt: skip
    finally:
        stop_threads(server, follower=follower)

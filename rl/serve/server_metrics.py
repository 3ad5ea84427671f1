"""Server metrics in Prometheus' text format (/metrics): requests by endpoint and status, tokens
emitted and their rate, queue depth, the params version, p50/p99 request latency, and speculative
decoding's MTP drafts: drafted and accepted totals, acceptance (accepted / drafted) and tokens per
verify step ((slot-steps + accepted) / slot-steps: each verify step of a sequence emits its
accepted drafts and one token more; 1 for plain decoding). A drop in acceptance after a weight
swap is a server getting slower (rl/serve/realtime.py's promotion gate has a floor on it)."""

from __future__ import annotations

import collections
import threading
import time

import numpy as np


class Metrics:
    def __init__(self, *, window_s: float = 10.0, latencies: int = 1000):
        self.lock = threading.Lock()
        self.requests: collections.Counter = collections.Counter()  # (endpoint, status) -> n
        self.tokens = 0
        self.recent: collections.deque = collections.deque()  # (time, tokens) in the rate window
        self.window_s = window_s
        self.latencies: collections.deque = collections.deque(maxlen=latencies)  # seconds

    def request(self, endpoint: str, status: int, seconds: float | None = None) -> None:
        with self.lock:
            self.requests[(endpoint, status)] += 1
            if seconds is not None:
                self.latencies.append(seconds)

    def emitted(self, n: int) -> None:
        now = time.monotonic()
        with self.lock:
            self.tokens += n
            self.recent.append((now, n))
            while self.recent and self.recent[0][0] < now - self.window_s:
                self.recent.popleft()

    def tokens_per_s(self) -> float:
        with self.lock:
            if not self.recent:
                return 0.0
            span = max(time.monotonic() - self.recent[0][0], 1e-3)
            return sum(n for _, n in self.recent) / span

    def text(self, *, waiting: int, running: int, version: int, decode: dict | None = None) -> str:
        """decode: the engine's counters (model/engine/ Engine.counters), or None."""
        with self.lock:
            lat = np.asarray(self.latencies) if self.latencies else np.zeros(1)
            lines = ["# TYPE serve_requests_total counter"]
            for (endpoint, status), n in sorted(self.requests.items()):
                lines.append(f'serve_requests_total{{endpoint="{endpoint}",status="{status}"}} {n}')
            tokens = self.tokens
        lines += [
            "# TYPE serve_generated_tokens_total counter",
            f"serve_generated_tokens_total {tokens}",
            "# TYPE serve_tokens_per_second gauge",
            f"serve_tokens_per_second {self.tokens_per_s():.3f}",
            "# TYPE serve_queue_depth gauge",
            f"serve_queue_depth {waiting}",
            "# TYPE serve_running_requests gauge",
            f"serve_running_requests {running}",
            "# TYPE serve_params_version gauge",
            f"serve_params_version {version}",
            "# TYPE serve_request_latency_seconds summary",
            f'serve_request_latency_seconds{{quantile="0.5"}} {np.percentile(lat, 50):.6f}',
            f'serve_request_latency_seconds{{quantile="0.99"}} {np.percentile(lat, 99):.6f}',
        ]
        if decode is not None:
            lines += decode_lines(decode)
        return "\n".join(lines) + "\n"


def decode_lines(c: dict) -> list[str]:
    """Prometheus lines of the engine's decode counters (acceptance NaN before any draft)."""
    drafted, accepted, steps = c["drafted"], c["accepted"], c["slot_steps"]
    acceptance = accepted / drafted if drafted else float("nan")
    per_step = (steps + accepted) / steps if steps else float("nan")
    return [
        "# TYPE serve_spec_drafted_tokens_total counter",
        f"serve_spec_drafted_tokens_total {drafted}",
        "# TYPE serve_spec_accepted_tokens_total counter",
        f"serve_spec_accepted_tokens_total {accepted}",
        "# TYPE serve_spec_acceptance gauge",
        f"serve_spec_acceptance {acceptance:.6f}",
        "# TYPE serve_tokens_per_verify_step gauge",
        f"serve_tokens_per_verify_step {per_step:.6f}",
    ]

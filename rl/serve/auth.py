"""API keys and per-key limits for the server (rl/serve/app.py).

    keys = load_keys("env:COMPOSER_API_KEYS")    # or a file: one key per line, '#' comments
    key_id = keys.check("Bearer sk-...")          # -> the key's id, or ApiError 401
    check_bind("0.0.0.0", keys, allow_open=False)  # ConfigError: a public bind needs keys

Keys never reach the command line in clear (`ps` shows a process's arguments to every user):
`serve.api_keys` names where they are, a file or an environment variable, and a value that is
neither is refused. The server keeps only each key's SHA-256; a key's id, what the log and
metrics carry, is the first 16 hex digits of it (64 bits: no collision among any plausible
number of keys, and not the key: SHA-256 is not invertible). Without keys every request has the
id OPEN.

Rate limit: a token bucket per key id (`rate_per_s` refill, `burst` capacity): a request that
finds the bucket empty gets 429 with Retry-After = the seconds until one token is back.
Concurrency: at most `max_concurrent` requests of one key in flight (429, Retry-After 1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import math
import os
import threading
import time

from model.errors import ConfigError
from rl.serve.protocol import ApiError

OPEN = "open"  # the key id of every request to a server without keys


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_id(key: str) -> str:
    return key_hash(key)[:16]


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, kind="invalid_request_error", code="invalid_api_key")


@dataclasses.dataclass
class Keys:
    """The configured keys as {sha256 hex: key id}; empty = an open server."""

    hashes: dict[str, str]

    @property
    def open(self) -> bool:
        return not self.hashes

    def check(self, authorization: str | None) -> str:
        """An `Authorization` header -> the key id (OPEN without keys); 401 otherwise."""
        if self.open:
            return OPEN
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthorized("missing API key: send the header 'Authorization: Bearer KEY'")
        digest = key_hash(key.strip())
        for known, kid in self.hashes.items():  # constant time per comparison
            if hmac.compare_digest(known, digest):
                return kid
        raise _unauthorized("invalid API key")


def _parse(text: str, where: str) -> list[str]:
    keys = [k.strip() for line in text.splitlines() for k in line.split("#")[0].split(",")]
    keys = [k for k in keys if k]
    if not keys:
        raise ConfigError(f"serve.api_keys={where}: holds no key")
    if any(len(k) < 8 or any(c.isspace() for c in k) for k in keys):
        raise ConfigError(f"serve.api_keys={where}: a key shorter than 8 characters or with spaces")
    return keys


def load_keys(spec: str) -> Keys:
    """serve.api_keys -> Keys. '' = none; 'env:NAME' = the variable's keys (comma or newline
    separated); otherwise a file path, one key per line ('#' starts a comment)."""
    if not spec:
        return Keys({})
    if spec.startswith("env:"):
        name = spec[4:]
        if name not in os.environ:
            raise ConfigError(f"serve.api_keys={spec}: environment variable {name!r} is not set")
        keys = _parse(os.environ[name], spec)
    elif os.path.isfile(spec):
        with open(spec) as f:
            keys = _parse(f.read(), spec)
    else:  # the value itself is never echoed: it may be a key typed on the command line
        raise ConfigError(
            "serve.api_keys: not 'env:NAME' nor an existing file (keys are never given in clear "
            "on the command line)"
        )
    return Keys({key_hash(k): key_id(k) for k in keys})


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


def check_bind(host: str, keys: Keys, *, allow_open: bool) -> None:
    if keys.open and not allow_open and not is_loopback(host):
        raise ConfigError(
            f"serve.host={host}: a non-loopback bind needs serve.api_keys (or "
            "serve.allow_open=True to serve without keys)"
        )


class Limiter:
    """Per key id: a token-bucket rate limit and a cap on requests in flight. Thread-safe."""

    def __init__(self, *, rate_per_s: float, burst: int, max_concurrent: int, clock=time.monotonic):
        self.rate, self.burst, self.max_concurrent, self.clock = (
            rate_per_s,
            burst,
            max_concurrent,
            clock,
        )
        self.buckets: dict[str, tuple[float, float]] = {}  # key id -> (tokens, at time)
        self.running: dict[str, int] = {}
        self.lock = threading.Lock()

    def admit(self, kid: str) -> None:
        """Takes one token of kid's bucket; 429 (with retry_after) when it is empty."""
        if self.rate <= 0:  # no rate limit
            return
        with self.lock:
            now = self.clock()
            tokens, at = self.buckets.get(kid, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens < 1:
                self.buckets[kid] = (tokens, now)
                wait = math.ceil((1 - tokens) / self.rate)
                raise _too_many(f"rate limit: {self.rate:g} requests/s per key", wait)
            self.buckets[kid] = (tokens - 1, now)

    def enter(self, kid: str) -> None:
        with self.lock:
            n = self.running.get(kid, 0)
            if self.max_concurrent > 0 and n >= self.max_concurrent:
                raise _too_many(
                    f"concurrency limit: {self.max_concurrent} requests in flight per key", 1
                )
            self.running[kid] = n + 1

    def leave(self, kid: str) -> None:
        with self.lock:
            self.running[kid] -= 1


def _too_many(message: str, retry_after: int) -> ApiError:
    e = ApiError(429, message, kind="requests", code="rate_limit_exceeded")
    e.headers = {"Retry-After": str(max(1, int(retry_after)))}
    return e

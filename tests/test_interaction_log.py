"""The interaction log (rl/serve/interaction_log.py): a SIGKILL'd writer loses at most the record
it was writing, never an acknowledged one; torn and corrupt tails are detected and counted;
rotation by size; a reopened log knows every logged id and starts a fresh file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from rl.serve.interaction_log import InteractionLog, end_positions, read_log

WRITER = textwrap.dedent(
    """
    import sys
    from rl.serve.interaction_log import InteractionLog
    log = InteractionLog(sys.argv[1], max_bytes=1 << 20)
    i = 0
    while True:
        log.append({"kind": "exchange", "id": f"r{i}", "tokens": list(range(40_000))})
        print(i, flush=True)  # acknowledged: on disk (fsync) before this line
        i += 1
    """
)


def test_sigkill_mid_write_keeps_every_acknowledged_record(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=root
    )
    acked = -1
    for line in proc.stdout:
        acked = int(line)
        if acked == 12:  # ~3 MB written: a few rotations behind us, the next write under way
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stats = {}
    ids = [r["id"] for _, r in read_log(str(tmp_path), stats=stats)]
    assert ids[: acked + 1] == [f"r{i}" for i in range(acked + 1)]  # all acknowledged, in order
    assert len(ids) <= acked + 3  # plus at most the ones written after the last line was read
    assert len(os.listdir(tmp_path)) >= 3  # rotated by size (1 MB files, ~290 KB records)
    assert all(os.path.getsize(tmp_path / f) <= (1 << 20) + 300_000 for f in os.listdir(tmp_path))
    before = set(os.listdir(tmp_path))
    reopened = InteractionLog(str(tmp_path), max_bytes=1 << 20)
    assert set(ids) <= reopened.ids  # feedback for any logged id is accepted after a restart
    reopened.append({"kind": "exchange", "id": "after"})
    (new,) = set(os.listdir(tmp_path)) - before  # never appended behind a torn tail
    assert [r["id"] for _, r in read_log(str(tmp_path))][-1] == "after"
    assert [r["id"] for _, r in read_log(str(tmp_path), since={f: 1 << 40 for f in before})] == [
        "after"
    ]


def test_torn_and_corrupt_tails_are_detected(tmp_path):
    log = InteractionLog(str(tmp_path))
    for i in range(3):
        log.append({"kind": "exchange", "id": f"r{i}", "tokens": [i] * 10})
    log.close()
    (path,) = [tmp_path / f for f in os.listdir(tmp_path)]
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # a torn last record: half of it written
        f.truncate(size - 20)
    stats = {}
    assert [r["id"] for _, r in read_log(str(tmp_path), stats=stats)] == ["r0", "r1"]
    assert stats == {"torn": 1}
    with open(path, "r+b") as f:  # a flipped payload byte in the second record
        data = bytearray(f.read())
        data[size // 3 + 30] ^= 0xFF
        f.seek(0)
        f.write(data)
    assert [r["id"] for _, r in read_log(str(tmp_path))] == ["r0"]


def test_cursor_reads_only_what_came_after(tmp_path):
    log = InteractionLog(str(tmp_path), max_bytes=200)
    log.append({"kind": "exchange", "id": "a", "tokens": [1] * 50})
    cursor = end_positions(str(tmp_path))
    for rid in ("b", "c"):  # each one rotates (max_bytes 200 < 2 records)
        log.append({"kind": "exchange", "id": rid, "tokens": [1] * 50})
    assert [r["id"] for _, r in read_log(str(tmp_path), since=cursor)] == ["b", "c"]
    assert len(os.listdir(tmp_path)) == 3

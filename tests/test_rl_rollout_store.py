"""The rollout store (rl/stores/store.py) on a local directory and on a real S3 server (SeaweedFS on
loopback, tests/s3_fixture.py): groups round-trip bitwise with their metadata, a reader racing a
writer only ever lists whole groups, pickled objects are refused on both sides, and an unreachable
store fails in bounded time with one line."""

import json
import threading
import time

import numpy as np
import pytest
from s3_fixture import closed_port, nobody_home_spec, s3_server  # noqa: F401 (the session fixture)

from rl.stores.kvstore import StoreError
from rl.stores.store import DamagedGroup, RolloutStore, rollout_store_path


def _group(seed: int, n: int = 3, tokens: int = 64) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "tokens": rng.integers(0, 1000, tokens).astype(np.int32),
            "mask": (rng.random(tokens) < 0.5).astype(np.float32),
            "logprobs": rng.normal(size=tokens).astype(np.float32),
            "versions": np.full(tokens, seed, np.int32),
            "reward": np.float32(rng.random()),  # numpy scalars become JSON numbers
            "task": f"t{seed}",
            "meta": {"turns": np.int64(2)},
        }
        for _ in range(n)
    ]


def _store(kind: str, tmp_path, s3_spec, name: str) -> str:
    if kind == "local":
        return str(tmp_path / name)
    return json.dumps(s3_spec(f"{name}/"))  # what --config.rl.rollout_store= takes


@pytest.fixture(params=["local", "s3"])
def kind(request):
    return request.param


@pytest.fixture
def s3_spec(kind, request):
    return request.getfixturevalue("s3_server") if kind == "s3" else None


def test_groups_round_trip_bitwise_and_progress(kind, s3_spec, tmp_path):
    store = RolloutStore(_store(kind, tmp_path, s3_spec, "rt"))
    assert store.list() == [] and store.progress() == {"consumed": 0, "version": -1}
    for g in (2, 0, 1):
        store.put(f"{g:06d}", _group(g))
    store.put("000003", [])  # a skipped task: an empty group
    assert store.list() == ["000000", "000001", "000002", "000003"]
    assert store.get("000003") == []
    got, want = store.get("000002"), _group(2)
    assert len(got) == 3
    for a, b in zip(got, want):
        for k in ("tokens", "mask", "logprobs", "versions"):
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
        assert a["reward"] == float(b["reward"]) and a["task"] == b["task"]
        assert a["meta"] == {"turns": 2}
    store.write_progress({"consumed": 3, "version": 7})
    assert RolloutStore(_store(kind, tmp_path, s3_spec, "rt")).progress() == {
        "consumed": 3,
        "version": 7,
    }
    with pytest.raises(KeyError, match="no group 000009"):
        store.get("000009")


def test_a_reader_racing_a_writer_sees_only_whole_groups(kind, s3_spec, tmp_path):
    """Groups of ~1 MB written one after another while another store object lists and reads:
    every group it lists decodes whole (one atomic write per group)."""
    path = _store(kind, tmp_path, s3_spec, "race")
    writer, reader = RolloutStore(path), RolloutStore(path)
    n, seen, errors = 12, set(), []

    def write():
        for g in range(n):
            writer.put(f"{g:06d}", _group(g, n=4, tokens=32_768))

    t = threading.Thread(target=write)
    t.start()
    while t.is_alive() or len(seen) < n:
        for g in reader.list():
            if g not in seen:
                try:
                    recs = reader.get(g)
                    assert len(recs) == 4 and recs[3]["tokens"].size == 32_768
                    assert int(recs[0]["versions"][-1]) == int(g)
                except Exception as e:
                    errors.append(f"{g}: {e}")
                seen.add(g)
        if not t.is_alive() and len(seen) < n and len(reader.list()) < n:
            break
    t.join()
    assert errors == [] and seen == {f"{g:06d}" for g in range(n)}


def test_pickled_objects_are_refused_and_damage_is_one_line(tmp_path):
    store = RolloutStore(str(tmp_path / "r"))
    bad = _group(0, n=1)
    bad[0]["tokens"] = np.array([object()])
    with pytest.raises(ValueError, match="group 000000 episode 0 field tokens: object array"):
        store.put("000000", bad)
    assert store.list() == []  # nothing written
    store.kv.put("groups/000001.npz", b"PK\x03\x04 truncated")
    with pytest.raises(DamagedGroup) as e:
        store.get("000001")
    assert "\n" not in str(e.value) and "group 000001 damaged" in str(e.value)


def test_rollout_store_path_and_unreachable_store():
    import ml_collections

    rl = ml_collections.ConfigDict({"rollout_store": ""})
    assert rollout_store_path(rl, "/w") == "/w/rollouts"
    rl.rollout_store = "s3://b/x"
    assert rollout_store_path(rl, "/w") == "s3://b/x"
    port = closed_port()
    spec = nobody_home_spec(port)
    t0 = time.perf_counter()
    with pytest.raises(StoreError) as e:
        RolloutStore(json.dumps(spec)).list()
    assert time.perf_counter() - t0 < 20
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"rollout store http://127.0.0.1:{port}")
    with pytest.raises(ValueError, match="rollout store spec .*not valid JSON"):
        RolloutStore('{"driver": ')

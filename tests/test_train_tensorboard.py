import struct

import pytest

from train import tensorboard as tb


def test_crc32c_known_vector():
    assert tb.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value


def test_event_file_roundtrip(tmp_path):
    w = tb.SummaryWriter(str(tmp_path))
    w.scalars(10, {"loss": 2.5, "lr": 1e-3})
    w.scalars(20, {"loss": 1.25})
    w.close()
    got = tb.read_scalars(w.path)
    assert [(s, t) for s, t, _ in got] == [(10, "loss"), (10, "lr"), (20, "loss")]
    assert got[0][2] == 2.5 and abs(got[1][2] - 1e-3) < 1e-9 and got[2][2] == 1.25
    with open(w.path, "rb") as f:
        (first_len,) = struct.unpack("<Q", f.read(8))
    assert first_len > 0  # file_version event first, as TensorBoard expects


def test_corrupted_record_is_detected(tmp_path):
    w = tb.SummaryWriter(str(tmp_path))
    w.scalars(1, {"loss": 1.0})
    w.close()
    data = bytearray(open(w.path, "rb").read())
    data[-6] ^= 0xFF  # flip a byte inside the last record's payload
    open(w.path, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="bad data crc"):
        tb.read_scalars(w.path)

"""train/tensorboard.py on tensorboardX, read back with TensorBoard's own loader: scalars,
histograms and images round-trip, and every write is on disk before close (a killed run keeps
what it logged). < 5 s."""

import os
import subprocess
import sys

import numpy as np
import pytest

from train import tensorboard as tb

pytest.importorskip("tensorboard", reason="the reader is TensorBoard's own (the test extra)")


def test_scalars_histograms_images_round_trip(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    w = tb.SummaryWriter(str(tmp_path / "tb"))
    w.scalars(10, {"loss": 2.5, "lr": 1e-3})
    w.scalars(20, {"pass@1": 1.25})  # tags kept exactly
    w.histogram(20, "weights", np.arange(7.0))
    fig = plt.figure(figsize=(4, 3), dpi=50)  # 200 x 150 pixels
    plt.plot([0, 1], [1, 0])
    fig.savefig(tmp_path / "plot.png")
    w.image(20, "eval/plot", str(tmp_path / "plot.png"))
    w.close()
    assert os.path.dirname(w.path) == str(tmp_path / "tb")
    assert tb.read_events(w.path) == [
        (10, "loss", "scalars", 2.5),
        (10, "lr", "scalars", np.float32(1e-3)),  # TensorBoard scalars are float32
        (20, "pass@1", "scalars", 1.25),
        (20, "weights", "histograms", 7),
        (20, "eval/plot", "images", (150, 200)),
    ]
    assert tb.read_scalars(w.path)[0] == (10, "loss", 2.5)


def test_a_killed_writer_loses_nothing_it_logged(tmp_path):
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {os.getcwd()!r})\n"
        "from train.tensorboard import SummaryWriter\n"
        f"w = SummaryWriter({str(tmp_path)!r})\n"
        "w.scalars(1, {'loss': 3.0})\n"
        "w.scalars(2, {'loss': 2.0})\n"
        "os.kill(os.getpid(), 9)\n"  # no close, no atexit
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert out.returncode == -9, out.stderr[-2000:]
    (name,) = [f for f in os.listdir(tmp_path) if f.startswith("events.out.tfevents.")]
    assert tb.read_scalars(str(tmp_path / name)) == [(1, "loss", 3.0), (2, "loss", 2.0)]
    two = tb.SummaryWriter(str(tmp_path))  # a resumed run writes a file of its own
    two.close()
    assert len(os.listdir(tmp_path)) == 2 and two.path != str(tmp_path / name)


def test_two_writers_of_one_directory_in_one_second_keep_their_own_files(tmp_path):
    """The event file name's time has whole seconds: an eval run that reopens a checkpoint's
    eval/tb within the same second once found no new file (ValueError in eval's compare)."""
    first, second = tb.SummaryWriter(str(tmp_path)), tb.SummaryWriter(str(tmp_path))
    assert first.path != second.path
    first.scalars(1, {"a": 1.0})
    second.scalars(2, {"b": 2.0})
    assert tb.read_events(first.path) == [(1, "a", "scalars", 1.0)]
    assert tb.read_events(second.path) == [(2, "b", "scalars", 2.0)]

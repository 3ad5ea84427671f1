"""TensorBoard events through tensorboardX (MaxText's choice; no TensorFlow needed): its summary
builders (scalars, histograms, images: the eval plots) and its record writer, used synchronously
(one event per call, flushed before returning) so a killed run loses nothing it logged;
tensorboardX's own SummaryWriter queues events for a background thread and its flush() does not
drain that queue.
`read_events` reads a file back (tests, scripts) with the `tensorboard` package's own loader
(`pip install tensorboard`, in the `test` extra).
"""

from __future__ import annotations

import glob
import itertools
import os
import sys
import time

import numpy as np


def _tensorboardx():
    """(summary, EventsWriter, Event, Summary) from tensorboardX, imported on first use with torch
    hidden: tensorboardX imports torch whenever it is installed (6-7 s and ~0.5 GB per process
    measured here) only to accept torch tensors, which nothing here passes. A process that already
    has torch keeps it; the hiding lasts only for this import."""
    hide = "torch" not in sys.modules
    if hide:
        sys.modules["torch"] = None  # `import torch` raises ImportError, which tensorboardX handles
    try:
        from tensorboardX import summary
        from tensorboardX.event_file_writer import (
            EventsWriter,
        )
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import (
            Summary,
        )
    finally:
        if hide:
            del sys.modules["torch"]
    return summary, EventsWriter, Event, Summary


_WRITERS = itertools.count()  # per process: two writers opened in one second get two files


class SummaryWriter:
    """<logdir>/events.out.tfevents.<time>.<host>.<pid>.<n>: one file per writer (a resumed run
    adds one; TensorBoard merges the files of a directory). The file name's time has whole
    seconds, so n, this process's writer count, keeps two writers of one directory apart."""

    def __init__(self, logdir: str):
        os.makedirs(logdir, exist_ok=True)
        pattern = os.path.join(logdir, "events.out.tfevents.*")
        before = set(glob.glob(pattern))
        self._summary, events_writer, self._event, self._proto = _tensorboardx()
        suffix = f".{os.getpid()}.{next(_WRITERS)}"
        self._events = events_writer(os.path.join(logdir, "events"), suffix)
        self._events.flush()  # the file and its version record exist before the first scalar
        (self.path,) = set(glob.glob(pattern)) - before

    def _write(self, step: int, summaries: list) -> None:
        values = [v for s in summaries for v in s.value]
        summary = self._proto(value=values)
        event = self._event(wall_time=time.time(), step=int(step), summary=summary)
        self._events.write_event(event)
        self._events.flush()

    def scalars(self, step: int, values: dict) -> None:
        # Tags exactly as given ('pass@1', as in the reports): tensorboardX's summary.scalar
        # would rewrite characters outside [A-Za-z0-9_./-] ('pass_1'); TensorBoard takes any tag.
        values = [self._proto.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()]
        self._write(step, [self._proto(value=values)])

    def histogram(self, step: int, tag: str, values) -> None:
        histogram = self._summary.histogram(tag, np.asarray(values, np.float64), "auto")
        self._write(step, [histogram])

    def image(self, step: int, tag: str, png_path: str) -> None:
        """A PNG file (e.g. an eval plot) as an image summary."""
        from matplotlib import image

        pixels = image.imread(png_path)[..., :3]  # [H, W, 3] floats in [0, 1] (alpha dropped)
        self._write(step, [self._summary.image(tag, pixels, dataformats="HWC")])

    def close(self) -> None:
        self._events.close()


def read_events(path: str) -> list[tuple[int, str, str, object]]:
    """(step, tag, kind, value) for every summary value in an event file, as TensorBoard's own
    loader presents them: kind 'scalars' (a float), 'images' ((height, width) of the encoded
    PNG) or 'histograms' (the number of samples)."""
    from tensorboard.backend.event_processing.event_file_loader import (
        EventFileLoader,
    )
    from tensorboard.util.tensor_util import make_ndarray

    out = []
    for event in EventFileLoader(path).Load():
        for v in event.summary.value:
            kind, array = v.metadata.plugin_data.plugin_name, make_ndarray(v.tensor)
            if kind == "scalars":
                value = float(array)
            elif kind == "images":  # [width, height, png bytes...] as strings
                value = (int(array[1]), int(array[0]))
            elif kind == "histograms":  # [buckets, 3]: left edge, right edge, count
                value = int(array[:, 2].sum())
            else:
                continue
            out.append((event.step, v.tag, kind, value))
    return out


def read_scalars(path: str) -> list[tuple[int, str, float]]:
    """(step, tag, value) for every scalar in an event file."""
    return [(s, tag, v) for s, tag, kind, v in read_events(path) if kind == "scalars"]

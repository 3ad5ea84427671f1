"""The project's error classes, defined once: each is reported as one line that names what is wrong
(main.py prints `error: <message>` and exits 2 for the input ones), never a deep traceback."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config problem, reported in one line before anything is compiled."""


class InputError(ValueError):
    """A missing or unreadable input named on the command line (a workdir without checkpoints,
    a params dir that is not an export), reported in one line."""


class CheckpointError(ValueError):
    """A bad HF folder (config.json, tensors), reported in one line that names what is wrong."""


class CheckpointNotFound(CheckpointError, FileNotFoundError):
    pass


class DataError(ValueError):
    """Bad input in one document. kind: empty | undecodable | bad_json | bad_field | bad_chat."""

    def __init__(self, kind: str, where: str, message: str):
        super().__init__(f"{where}: {message}")
        self.kind = kind
        self.where = where


class StoreError(Exception):
    """A store (weights, rollouts) could not be read or written (unreachable, refused, timed
    out)."""

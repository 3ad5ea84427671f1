"""The tokenizer a params export's ids mean, recorded in the export.

A policy trained on a code BPE vocabulary (data/code_bpe.py) and then sampled, served or run as
an agent with the byte tokenizer reads its prompt as the wrong ids and answers in garbage, with
no error: the model's vocabulary is as large as or larger than either. So every export written by
training (train/convert.py) records its tokenizer beside model_config.json, with the vocabulary
file copied in (the export stays usable when the original is moved), and the commands that load
an export use it unless told otherwise, refusing a tokenizer that contradicts it.

    record_tokenizer(export_dir, "hf:/tmp/code_bpe_4096.json")
    tok = tokenizer_for_export(export_dir, spec="", model_vocab=cfg.vocab_size)

An export that records nothing (older ones, HF imports without a tokenizer) means bytes unless a
spec is given.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from typing import Any

from data.tokenizers import Tokenizer, load_tokenizer, spec_dict

RECORD = "tokenizer_spec.json"


def record_tokenizer(export_dir: str, spec: str | Mapping[str, Any] | None) -> None:
    """Writes into `export_dir` (a params export) the tokenizer `spec` names, its vocabulary file
    copied in as tokenizer<ext>; each file written whole or not at all."""
    options = spec_dict(spec)
    load_tokenizer(options)  # a spec that does not load is not recorded
    if "path" in options:
        name = "tokenizer" + (os.path.splitext(options["path"])[1] or ".json")
        tmp = os.path.join(export_dir, f"{name}.tmp{os.getpid()}")
        shutil.copyfile(options["path"], tmp)
        os.replace(tmp, os.path.join(export_dir, name))
        options["path"] = name  # relative to the export
    tmp = os.path.join(export_dir, f"{RECORD}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(options, f, indent=2, sort_keys=True)
    os.replace(tmp, os.path.join(export_dir, RECORD))


def recorded_tokenizer(export_dir: str) -> dict[str, Any] | None:
    """The spec `export_dir` records (its copied file's path made absolute), or None."""
    where = os.path.join(export_dir, RECORD)
    if not os.path.exists(where):
        return None
    try:
        with open(where, encoding="utf-8") as f:
            options = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{where}: unreadable ({e})") from None
    if "path" in options:
        options["path"] = os.path.join(os.path.abspath(export_dir), options["path"])
    return options


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same kind, options and vocabulary file contents (paths may differ: the export's copy)."""
    strip = lambda d: {k: v for k, v in d.items() if k != "path"}  # noqa: E731
    if strip(a) != strip(b):
        return False
    if "path" not in a:
        return True
    with open(a["path"], "rb") as fa, open(b["path"], "rb") as fb:
        return fa.read() == fb.read()


def tokenizer_for_export(
    export_dir: str, spec: str | Mapping[str, Any] | None, model_vocab: int
) -> Tokenizer:
    """The tokenizer for the export in `export_dir`: `spec` when given (not ""), else the one it
    records, else bytes. ValueError (one line) when `spec` contradicts the record or the
    tokenizer's ids outnumber the model's vocabulary."""
    recorded = recorded_tokenizer(export_dir)
    if spec:
        given = spec_dict(spec)
        if recorded is not None and not _same(given, recorded):
            raise ValueError(
                f"tokenizer {spec!r}: the export {export_dir} was trained with "
                f"{_describe(recorded)}"
            )
    chosen = spec_dict(spec) if spec else (recorded or {"kind": "byte"})
    tok = load_tokenizer(chosen)
    if tok.vocab_size > model_vocab:
        raise ValueError(
            f"tokenizer {_describe(chosen)} has {tok.vocab_size} ids; the model in {export_dir} "
            f"has {model_vocab}"
        )
    return tok


def _describe(options: Mapping[str, Any]) -> str:
    return options["kind"] + (f":{options['path']}" if "path" in options else "")

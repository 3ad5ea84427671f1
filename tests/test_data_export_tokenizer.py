"""data/export_tokenizer.py: an export records the tokenizer its ids mean (its vocabulary file
copied in), the commands that load it use that one, and a tokenizer that contradicts it, or has
more ids than the model, is refused in one line."""

import os
import shutil

import pytest

from data.export_tokenizer import record_tokenizer, recorded_tokenizer, tokenizer_for_export
from data.tokenizers import ByteTokenizer, load_tokenizer

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures/data/tokenizer.json")
TEXT = "def parse_header(line):\n    return line.split(':')\n"


def test_the_record_survives_the_vocabulary_file_moving(tmp_path):
    original = tmp_path / "vocab.json"
    shutil.copyfile(FIXTURE, original)
    export = tmp_path / "export"
    export.mkdir()
    record_tokenizer(str(export), f"hf:{original}")
    want = load_tokenizer(f"hf:{original}").encode(TEXT)
    original.unlink()
    assert sorted(os.listdir(export)) == ["tokenizer.json", "tokenizer_spec.json"]
    assert recorded_tokenizer(str(export)) == {"kind": "hf", "path": str(export / "tokenizer.json")}
    tok = tokenizer_for_export(str(export), "", model_vocab=400)
    assert tok.encode(TEXT) == want and tok.vocab_size == 400


def test_no_record_means_bytes_and_a_given_spec_is_used(tmp_path):
    assert recorded_tokenizer(str(tmp_path)) is None
    assert isinstance(tokenizer_for_export(str(tmp_path), "", 320), ByteTokenizer)
    assert tokenizer_for_export(str(tmp_path), f"hf:{FIXTURE}", 400).vocab_size == 400
    record_tokenizer(str(tmp_path), "byte")
    assert recorded_tokenizer(str(tmp_path)) == {"kind": "byte"}
    assert isinstance(tokenizer_for_export(str(tmp_path), "byte", 320), ByteTokenizer)


def test_a_contradiction_or_too_many_ids_is_one_line(tmp_path):
    record_tokenizer(str(tmp_path), f"hf:{FIXTURE}")
    with pytest.raises(ValueError, match="'byte': the export .* was trained with hf:"):
        tokenizer_for_export(str(tmp_path), "byte", 400)
    # the same vocabulary named by its original path is no contradiction
    assert tokenizer_for_export(str(tmp_path), f"hf:{FIXTURE}", 400).vocab_size == 400
    with pytest.raises(ValueError, match="has 400 ids; the model in .* has 320"):
        tokenizer_for_export(str(tmp_path), "", 320)
    with pytest.raises(ValueError, match="expected 'byte', 'hf:PATH'"):
        record_tokenizer(str(tmp_path), "sentencepiece:x.model")
    assert recorded_tokenizer(str(tmp_path))["kind"] == "hf"  # a refused spec left it as it was
    (tmp_path / "tokenizer_spec.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer_spec.json: unreadable"):
        recorded_tokenizer(str(tmp_path))


def test_sample_reads_the_prompt_in_the_recorded_vocabulary(tmp_path):
    """--mode=sample on an export that records a BPE vocabulary: the prompt is that
    vocabulary's ids and the completion its text (not bytes)."""
    import jax

    from eval.sample import sample_cli
    from model import generate, init_params, presets
    from model.export import save_params

    cfg = presets.get("tiny", vocab_size=400)
    params = init_params(cfg, jax.random.PRNGKey(0))
    save_params(str(tmp_path), cfg, params)
    record_tokenizer(str(tmp_path), f"hf:{FIXTURE}")
    tok = load_tokenizer(f"hf:{FIXTURE}")
    text = sample_cli(str(tmp_path), "def f(", max_new_tokens=6)
    ids = [tok.bos_id] + tok.encode("def f(")
    want = generate(cfg, params, [ids], 6, stop_tokens=[tok.eos_id], valid_vocab=400).tokens[0]
    want = [t for t in want if t != tok.eos_id]
    assert text == tok.decode(want) and len(want) >= 1


def test_training_from_an_export_of_another_tokenizer_is_refused_before_compiling(tmp_path):
    """--config.init_params_from=EXPORT with a data.tokenizer other than the one EXPORT records:
    one config error line, nothing compiled or written (main.py)."""
    import subprocess
    import sys

    from model import presets
    from model.export import config_to_json

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    export = tmp_path / "export"
    (export / "params").mkdir(parents=True)  # the trainer's first check: a params folder
    (export / "model_config.json").write_text(config_to_json(presets.get("tiny", vocab_size=400)))
    record_tokenizer(str(export), f"hf:{FIXTURE}")
    out = subprocess.run(
        [sys.executable, os.path.join(root, "main.py"), "--config.model=tiny",
         f"--config.init_params_from={export}",
         f"--workdir={tmp_path / 'w'}"],
        capture_output=True, text=True, cwd=root, timeout=300,
    )  # fmt: skip
    lines = [x for x in out.stderr.splitlines() if x.startswith("config error:")]
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
    assert "data.tokenizer: tokenizer 'byte': the export" in lines[0] and "hf:" in lines[0]
    assert not os.path.exists(tmp_path / "w" / "checkpoints")

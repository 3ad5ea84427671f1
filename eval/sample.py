"""`main.py --mode=sample`: complete a text prompt from an exported params checkpoint.

Lives outside model/ because it needs a tokenizer (data/); model/ never imports data/.
"""

from __future__ import annotations

from data.export_tokenizer import tokenizer_for_export
from eval.humaneval import decode_valid
from model.export import load_params
from model.prompt_batch import generate


def sample_cli(
    checkpoint_dir: str,
    prompt: str,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    top_p: float = 1.0,
    num_draft: int = 0,
    seed: int = 0,
    decode_dtype: str = "auto",
) -> str:
    """Completion of `prompt` (text, in the tokenizer the export records: data/export_tokenizer.py;
    bytes for one that records none) from a params checkpoint written by model.export.save_params;
    stops at the tokenizer's end-of-sequence token. decode_dtype: the engine's
    (ModelConfig.decode_dtype; the config's `decode_dtype`)."""
    if not prompt:
        raise ValueError("--prompt: empty")
    cfg, params = load_params(checkpoint_dir)
    cfg = cfg.replace(decode_dtype=decode_dtype)
    tok = tokenizer_for_export(checkpoint_dir, "", cfg.vocab_size)
    ids = [tok.bos_id] + tok.encode(prompt)  # documents start with <|bos|> in training (packing)
    out = generate(
        cfg,
        params,
        [ids],
        max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        stop_tokens=[tok.eos_id],
        num_draft=num_draft,
        valid_vocab=tok.vocab_size,  # never sample the model's padded ids (512 >= 272)
        seed=seed,
    )
    # valid_vocab keeps ids inside the tokenizer; decode_valid's U+FFFD guards foreign checkpoints.
    return decode_valid(tok, out.tokens[0])


def show(prompt: str, completion: str) -> str:
    """What --mode=sample prints: the prompt followed by its completion; a completion that is empty
    or only whitespace (an early checkpoint's usual guess) would print as nothing or a blank line,
    so then both are shown as Python literals, with a word on what happened."""
    if completion.strip():
        return prompt + completion
    what = "empty (the model ended the text at once)" if not completion else "whitespace only"
    return (
        f"prompt: {prompt!r}\ncompletion: {completion!r} ({what}, {len(completion)} chars; an "
        "early checkpoint often predicts only spaces and newlines: train longer, or try "
        "--temperature=0.8)"
    )

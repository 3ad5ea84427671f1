"""Self-summarization: an episode longer than the context is a chain of segments joined by the
policy's own summaries (the protocol is in rl/envs/README.md, "Summaries").

    cfg = SummaryConfig(trigger_tokens=1200, max_segments=4)     # or trigger_fraction=0.75
    env = CodingEnv(tok, max_tokens=1600, summary=cfg)

A summary turn is exactly   <|summary|> free text <|/summary|> <|end|>   (no tool call beside it).
When a segment's context reaches the trigger, the environment appends a summarize instruction (a
user message, mask 0) before the next "<|assistant|>"; the policy may also summarize earlier by its
own choice. After a summary the next segment's context is rebuilt as

    <|bos|> <|system|>..<|end|> <|user|> task <|end|>            the first segment's prompt prefix
    <|assistant|> <|summary|>..<|/summary|> <|end|>              the summary turn, token for token
    <|user|> continue note + files changed so far <|end|>        from the sandbox, not the model
    <|assistant|>

so the engine keeps the prefix's latent cache (rewind, no re-prefill) and the policy continues in
the same sandbox with the repository as it left it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from data.chat import summary_ids
from data.tokenizers import SPECIAL_TOKENS, Tokenizer

SUMMARIZE_INSTRUCTION = (
    "Your context is nearly full. Reply now with only a summary of your progress: "
    "{open}what you found (facts you still need, exactly), what you changed, what is left{close}. "
    "The episode then continues from the summary in the same repository."
)
# Appended to the system prompt when summaries are on (the policy may summarize by its own choice).
SUMMARY_HELP = (
    "\nSummary turn (instead of tool calls): <|summary|>progress and facts to keep<|/summary|> "
    "ends this context; the episode continues from the summary in the same repository."
)
MAX_LISTED_FILES = 32  # a continue note names at most this many changed files (then "+N more")


@dataclasses.dataclass(frozen=True)
class SummaryConfig:
    """When the environment asks for a summary and how many segments an episode may have.

    trigger_tokens > 0: a segment's context of at least that many tokens triggers the instruction;
    else trigger_fraction (0, 1) of the context budget (CodingEnv max_tokens). max_segments >= 2
    caps the chain (the last segment gets no instruction and ends at the budget as before)."""

    trigger_tokens: int = 0
    trigger_fraction: float = 0.0
    max_segments: int = 4

    def __post_init__(self):
        if self.trigger_tokens < 0 or not 0.0 <= self.trigger_fraction < 1.0:
            raise ValueError(
                f"summary trigger_tokens={self.trigger_tokens} / trigger_fraction="
                f"{self.trigger_fraction}: need tokens >= 0 and 0 <= fraction < 1"
            )
        if not (self.trigger_tokens or self.trigger_fraction):
            raise ValueError("summary: set trigger_tokens > 0 or trigger_fraction in (0, 1)")
        if self.max_segments < 2:
            raise ValueError(f"summary max_segments={self.max_segments}: need >= 2")

    def trigger(self, max_tokens: int) -> int:
        """The context length (tokens) at which a segment is told to summarize."""
        if self.trigger_tokens:
            return self.trigger_tokens
        return int(self.trigger_fraction * max_tokens)


def summary_config(block) -> SummaryConfig | None:
    """From a config block {trigger_tokens, trigger_fraction, max_segments} (a dict or
    ml_collections); None when both triggers are 0 (summarization off)."""
    if block is None:
        return None
    tokens, fraction = (
        int(block["trigger_tokens"]),
        float(block["trigger_fraction"]),
    )
    if not (tokens or fraction):
        return None
    return SummaryConfig(tokens, fraction, int(block["max_segments"]))


def summary_turn_ids(tok: Tokenizer, text: str) -> list[int]:
    """A whole summary turn: <|summary|> text <|/summary|> <|end|> (data/chat.py's rendering of an
    assistant message {"summary": text}, without its header)."""
    return summary_ids(tok, text) + [tok.special_id("end")]


def is_summary_turn(tok: Tokenizer, ids: Sequence[int]) -> bool:
    """True for exactly <|summary|> (text without control tokens) <|/summary|> <|end|>|<|eos|>."""
    ids = [int(t) for t in ids]
    if len(ids) < 3 or ids[-1] not in (tok.special_id("end"), tok.eos_id):
        return False
    body = ids[:-1]
    if body[0] != tok.special_id("summary") or body[-1] != tok.special_id("/summary"):
        return False
    specials = _special_ids(tok)
    return not any(t in specials for t in body[1:-1])


def _special_ids(tok: Tokenizer) -> set[int]:
    return {tok.special_id(n) for n in SPECIAL_TOKENS}


def instruction_ids(tok: Tokenizer) -> list[int]:
    """The summarize instruction as a user message (mask 0): <|user|> text <|end|>."""
    text = SUMMARIZE_INSTRUCTION.format(open="<|summary|>", close="<|/summary|>")
    return [tok.special_id("user")] + tok.encode(text) + [tok.special_id("end")]


def continue_ids(tok: Tokenizer, segment: int, max_segments: int, changed: list[str]) -> list[int]:
    """The user message that opens segment `segment` (0-based) after the summary: where the
    episode stands and the files changed so far (a fact of the sandbox, so the summary need not
    spend tokens on it and cannot get it wrong)."""
    shown = changed[:MAX_LISTED_FILES]
    more = f" (+{len(changed) - len(shown)} more)" if len(changed) > len(shown) else ""
    files = ", ".join(shown) + more if changed else "none"
    text = (
        f"Context reset: segment {segment + 1} of at most {max_segments}. Your summary is above. "
        f"Files changed so far: {files}. Continue the task."
    )
    return [tok.special_id("user")] + tok.encode(text) + [tok.special_id("end")]


def changed_files(sandbox, original: dict[str, str]) -> list[str]:
    """Paths whose content differs from the task's original files, added ones included, then the
    deleted ones (sorted). Read from the sandbox (ground truth), never from the model's words."""
    current = set(sandbox.list_files())
    out = []
    for path in sorted(current):
        try:
            same = path in original and sandbox.read_text(path) == original[path]
        except (OSError, ValueError):
            same = False  # unreadable (a planted link, a special file): report it as changed
        if not same:
            out.append(path)
    return out + [f"{p} (deleted)" for p in sorted(set(original) - current)]

"""The workload: how many sequences, how long the prompt, how many tokens to generate."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError
from .limits import check_int


@dataclass(frozen=True)
class Workload:
    """Batch of ``batch`` sequences, each a ``prompt_len``-token prompt then ``gen_len``
    generated tokens.

    Convention: prefill processes the prompt and its LM head yields the first generated token;
    the remaining ``gen_len - 1`` tokens each take one decode step. A zero-length prompt (as in
    llama-bench ``tgN``) has no prefill and ``gen_len`` decode steps from an empty cache.
    """
    batch: int = 1
    prompt_len: int = 2048
    gen_len: int = 256
    flash_attention: bool = True
    logits_all_tokens: bool = False

    def __post_init__(self):
        for f in ("batch", "prompt_len", "gen_len"):
            check_int(f, getattr(self, f))
        if self.prompt_len + self.gen_len < 1:
            raise ConfigError("prompt_len + gen_len must be at least 1")
        for f in ("flash_attention", "logits_all_tokens"):
            if not isinstance(getattr(self, f), bool):
                raise ConfigError(f"{f} must be true or false, got {getattr(self, f)!r}")

    @property
    def decode_contexts(self) -> tuple[int, int]:
        """Inclusive range (first, last) of context lengths of the decode steps; empty when
        first > last. Context = tokens attended to, including the one being processed."""
        if self.prompt_len == 0:
            return 1, self.gen_len
        return self.prompt_len + 1, self.prompt_len + self.gen_len - 1

    @property
    def decode_steps(self) -> int:
        first, last = self.decode_contexts
        return max(0, last - first + 1)

    @property
    def max_context(self) -> int:
        return self.prompt_len + self.gen_len

"""What the judge keeps of earlier rounds' reference outputs to recognise a stale result (docs/anti-cheating.md,
cheat 1): a small output whole on the host, a large one as its values at `SAMPLE` positions drawn in secret, on its
own device (a stale output equals the old one everywhere, an honest one almost nowhere)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from workbench.eval.judge.correctness.compare import STALE_SHARE
from workbench.eval.wire.tensors import bytes_per_element

#: Outputs up to this size are kept whole (on the host).
WHOLE_BYTES = 64 << 20
#: Positions kept of a larger output.
SAMPLE = 1 << 20


@dataclass
class PriorOutput:
    """One earlier reference output: whole (`whole`), or its values at `index` (`values`)."""

    shape: torch.Size
    dtype: torch.dtype
    whole: torch.Tensor | None = None
    index: torch.Tensor | None = None
    values: torch.Tensor | None = None

    @classmethod
    def of(cls, t: torch.Tensor) -> PriorOutput:
        t = t.detach()
        if t.numel() * t.element_size() <= WHOLE_BYTES:
            return cls(t.shape, t.dtype, whole=t.cpu() if t.device.type != "cpu" else t.clone())
        gen = torch.Generator(device=t.device)
        gen.manual_seed(random.SystemRandom().randrange(1 << 62))
        index = torch.randint(0, t.numel(), (SAMPLE,), device=t.device, generator=gen)
        return cls(t.shape, t.dtype, index=index, values=t.reshape(-1)[index].clone())

    def matches(self, out: torch.Tensor, bad: torch.Tensor) -> bool:
        """Whether at least STALE_SHARE of the positions where `out` is wrong hold this output's nonzero bits."""
        if tuple(out.shape) != tuple(self.shape) or out.dtype != self.dtype:
            return False
        if self.whole is not None:
            old, got, wrong = self.whole.to(out.device), out, bad.to(out.device)
        else:
            index = self.index.to(out.device)
            old, got, wrong = self.values.to(out.device), out.reshape(-1)[index], bad.to(out.device).reshape(-1)[index]
        same = (bytes_per_element(got) == bytes_per_element(old)) & (old != 0) & wrong
        wrong_count = int(wrong.sum())
        return wrong_count > 0 and int(same.sum()) >= STALE_SHARE * wrong_count

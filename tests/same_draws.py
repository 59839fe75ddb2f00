"""Holding draws that the counter scheme makes the same numbers against each other (imported by the draw tests).

Every number is a function of (key, tag, step, task, value index), so a task drawn alone, inside a sweep, as part of
a longer context or with more padding is the same numbers, bit for bit. One known exception, on some CPUs only: the
compiled engines normalise a context's points to unit length in a loop the compiler vectorises, with a scalar loop
for the points left over, and where the vector loop's approximate reciprocal square root (``-ffast-math``) rounds
differently from the scalar one (seen on an Intel Xeon with AVX-512: ``vrsqrt14ps`` against the scalar estimate), a
point's unit vector differs in its last bits (2-3e-7) with the context length it was drawn in. The words, the normals
and every integer draw stay the same bits there. Fixing it (every point through the vector loop) changes the
engines' sources, and so every record's code fingerprint: it waits for a session that regenerates all the records.

:class:`SameDraws` holds every pair to float rounding (a failure otherwise), notes the pairs that are not the same
bits, and at the end fails on them, unless they come from a compiled engine, where it marks the test as the known
failure (``xfail``, with the pairs named), so the suite shows it without failing CI on such a CPU.
"""

from __future__ import annotations

import pytest
import torch

#: Within this the known exception's differences lie (a few units in the last place of numbers of size <= 6).
ROUNDING = dict(rtol=2e-6, atol=2e-6)


class SameDraws:
    def __init__(self, compiled: bool):
        self.compiled, self.differ = compiled, []

    def __call__(self, got: torch.Tensor, want: torch.Tensor, what: str) -> None:
        """``got`` and ``want`` are the same draws: equal to rounding here, bit for bit checked in :meth:`finish`."""
        torch.testing.assert_close(got, want, **ROUNDING, msg=lambda m: f"{what}: {m}")
        if not torch.equal(got, want):
            self.differ.append(f"{what} (largest difference {float((got - want).abs().max()):.1e})")

    def finish(self) -> None:
        if not self.differ:
            return
        text = "; ".join(self.differ)
        if self.compiled:
            pytest.xfail("known, on CPUs whose vectorised reciprocal square root rounds differently from the scalar "
                         f"one (tests/same_draws.py): equal to rounding but not bit for bit: {text}")
        pytest.fail(f"not the same bits: {text}")

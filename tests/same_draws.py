"""Holding draws that the counter scheme makes the same numbers against each other (imported by the draw tests).

Every number is a function of (key, tag, step, task, value index), so a task drawn alone, inside a sweep, as part of
a longer context or with more padding is the same numbers, bit for bit, on either path. On an Intel Xeon with
AVX-512 the compiled engines once broke this in the last bits (1-4e-7; not on the AMD machines with AVX2): under
``-ffast-math`` GCC writes ``1/sqrtf`` as an estimate refined by one Newton step, and such CPUs estimate otherwise in
512-bit vectors than in narrower ones and scalars, so a point's unit vector depended on where in a loop it fell;
paper 2's normals (vector ``sqrtf``, ``logf``, ``cosf``, ``sinf``) also ran in 256- or 512-bit vectors with the count.
Both engines now take the inverse norms as IEEE operations and paper 2 draws its normals in whole 512-bit vectors.
Paper 1's engine also sums the squared norms in that exact function: summed in a ``-ffast-math``
loop, a point's squared norm rested on GCC adding a loop's vector body and its scalar remainder alike, and a build
that compiled the loop otherwise broke the prefix property by 1.2e-7.

:class:`SameDraws` checks each pair to float rounding first, so that a failure says whether the draws are other
numbers or the same numbers rounded otherwise, then requires the same bits of every pair in :meth:`finish`.
"""

from __future__ import annotations

import pytest
import torch

#: A few units in the last place of numbers of size <= 6: a difference within this is rounding, not other draws.
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
        if self.differ:
            path = "the compiled engine" if self.compiled else "the PyTorch path"
            pytest.fail(f"{path}: equal to rounding but not the same bits: {'; '.join(self.differ)}")

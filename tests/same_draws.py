"""Holding draws that the counter scheme makes the same numbers against each other (imported by the draw tests).

Every number is a function of (key, tag, step, task, value index), so a task drawn alone, inside a sweep, as part of
a longer context or with more padding is the same numbers, bit for bit. One known exception, on some CPUs only (seen
on an Intel Xeon with AVX-512; not on the AMD machines with AVX2 of earlier sessions): the compiled engines' floats
can differ in their last bits (1-4e-7) with the company a task is drawn in, while the words, the normals and every
integer draw stay the same bits. Diagnosed for paper 1's engine: it normalises a context's points in a loop over the
chunk's ``m`` points that the compiler vectorises with a scalar loop for the points left over, and ``1/sqrtf`` under
``-ffast-math`` becomes an approximate reciprocal square root that the two loops round differently, so a point's unit
vector depends on where it falls, i.e. on the context length. Running that loop over the whole chunk (zeros beyond
``m``) makes the draws the same bits on that CPU (checked); paper 2's engine has the same kind of loop (over the
points rounded up to 8; rounding up to the whole chunk fixes the sweep case) and a case not yet diagnosed (a task
padded to a larger input dimension). Both fixes change the engines' sources, and so every record's code fingerprint:
they wait for a session that regenerates all the records, the paper profile's included.

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
            pytest.xfail("known, on some CPUs: the compiled engine's floats are equal to rounding but not the same "
                         f"bits (tests/same_draws.py): {text}")
        pytest.fail(f"not the same bits: {text}")

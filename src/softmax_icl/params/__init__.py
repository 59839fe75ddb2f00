"""Per-figure parameter registries; importing this package registers every figure, in book order."""

from . import window_adaptation  # noqa: F401

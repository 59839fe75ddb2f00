"""Per-figure parameter registries; importing this package registers every figure, in book order."""

from . import window_adaptation  # noqa: F401
from . import norm_scaling  # noqa: F401
from . import generalization  # noqa: F401
from . import low_rank  # noqa: F401
from . import classification_kernel_gd  # noqa: F401

"""What a figure's parameters are: their kinds, profiles (smoke / default / paper) and checks.

Every figure (one notebook) declares its parameters in ``figures/<name>/params.py`` with these types: a kind, a
check, one value per profile, where the value comes from (``paper``, ``slides`` or ``chosen``) and why; a figure
package exports its :class:`Figure` as ``FIGURE``. A notebook resolves its configuration with
:func:`softmax_icl.book.registry.resolve`; the CLI validates with the same function before any compute, so a bad
value fails the same way everywhere, naming the parameter and the allowed values.

The settings-and-deviations page of the book is generated from the registry, so it always matches the code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


PROFILES = ("smoke", "default", "paper")

#: Function classes: the allowed values of every function-class parameter, kept here without torch so the registry
#: loads fast (:mod:`softmax_icl.tasks` samples them); the value says how ``L`` enters and the class's Lipschitz
#: constant.
FUNCTION_CLASSES = {
    "affine": "f(x) = l w^T x + b, l, b ~ U[-L, L], w ~ U^d",
    "relu": "f(x) = l1 (q^T x)_+ + l2 (-q^T x)_+ + b, l1, l2, b ~ U[-L, L], q ~ U^d",
    "cosine": "f(x) = cos(L w^T x + phi), w ~ U^d, phi ~ U[0, 2 pi)",
    "cosine_centered": "f(x) = cos(L w^T x + phi) - cos(phi) E_x[cos(L w^T x)]: the cosine task less its mean over "
                       "x ~ U^d (zero mean, no offset, isotropic inputs)",
    "lowrank_linear": "f(x) = L a^T B^T x, a ~ U^k, B in R^(d x k) orthonormal, fixed per run",
    "lowrank_affine": "f(x) = L a^T B^T x + 2",
    "lowrank_quadratic": "f(x) = (L a^T B^T x)^2",
    "lowrank_cosine": "f(x) = cos(4 L a^T B^T x)",
}
LOW_RANK_CLASSES = tuple(c for c in FUNCTION_CLASSES if c.startswith("lowrank_"))

# Regression tolerances (``tests/test_regression.py``, ``softmax-icl compare``; see :mod:`softmax_icl.book.compare`).
# A rerun of a figure on another machine or backend draws the same seeds but rounds differently in float32. Measured:
# the fused CPU kernel and SOFTMAX_ICL_KERNEL=torch agree to 6e-7 relative on all 164 numbers of
# window_adaptation's record (smoke profile); longer training and a GPU (other reduction orders, TF32) let rounding
# grow, to about a percent at most in the runs we know of (0.138 against 0.139). A change of the
# computation, or a bug, moves numbers by the scale of seed-to-seed variation, typically 5-30 %. The default, 5 %,
# sits between the two. Numbers that are differences of close quantities (slopes near 0, small rises) get a
# per-figure override in ``Figure.tolerances``; where the record has a seed standard error (``<name>_se``), the
# tolerance is at least SE_UNITS of it.
DEFAULT_RTOL = 0.05
#: Floor of every tolerance, for numbers that are 0 up to rounding.
DEFAULT_ATOL = 1e-6
#: Tolerance in units of a number's seed standard error, where the record gives one.
SE_UNITS = 2.0
DEVICE_HELP = "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"


class ParameterError(ValueError):
    """A parameter value that is not allowed; the message names the parameter and the allowed values."""


@dataclass(frozen=True)
class Param:
    """One notebook parameter."""

    kind: str                                  # int | float | str | bool | list[int] | list[float] | list[str]
    values: dict                               # profile -> value (missing profiles fall back to "default")
    help: str
    source: str = "chosen"                     # paper | slides | spec | chosen
    allowed: tuple | None = None               # for str kinds: the allowed values
    check: Callable[[Any], bool] | None = None
    check_text: str = ""                       # the allowed range, in words, for error messages
    distinct: bool = True                      # list kinds: no value twice (a grid point given twice is a typo)
    pool: bool = False                         # a seed of the book's pool: the value is BOOK_POOL above ``values``

    def value(self, profile: str):
        """The parameter's value at ``profile`` (a seed of the pool: its base value plus :data:`BOOK_POOL`)."""
        v = self.values.get(profile, self.values["default"])
        return v + BOOK_POOL if self.pool else v


def positive(x) -> bool:
    return x > 0


def non_negative(x) -> bool:
    return x >= 0


def at_least(m):
    return lambda x: x >= m


#: The fewest seeds a figure runs: its checks pool a statistic over seeds, and one seed gives no interval (its bounds
#: would be infinite).
MIN_SEEDS = 2


def min_seeds() -> dict:
    """The check of a ``seeds`` parameter (``Param(..., **min_seeds())``): at least :data:`MIN_SEEDS`."""
    return dict(check=at_least(MIN_SEEDS), check_text=f"an integer >= {MIN_SEEDS} (one seed gives no interval)")


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    paper: str
    params: dict = field(default_factory=dict)
    validate: Callable[[dict], None] | None = None   # cross-parameter checks; raise ParameterError
    notes: tuple = ()                                # figure-specific choices and deviations, for the book
    # regression tolerances (softmax_icl.book.compare): path prefix (e.g. "key_numbers.slope" or "claims.<id>.value") ->
    # relative tolerance instead of DEFAULT_RTOL, or None for a number that is not compared; say why in a comment
    tolerances: dict = field(default_factory=dict)

    @property
    def notebook(self) -> str:
        return f"{self.name}.ipynb"


def coerce(name: str, p: Param, value):
    """Convert ``value`` to the parameter's kind or raise ParameterError."""
    base = p.kind[5:-1] if p.kind.startswith("list[") else p.kind
    conv = {"int": int, "float": float, "str": str, "bool": bool}[base]

    def one(v):
        if base == "bool":
            if isinstance(v, bool):
                return v
            raise ParameterError(f"parameter {name!r} must be true or false, got {v!r}")
        if base == "int" and (isinstance(v, bool) or not float(v).is_integer()):
            raise ParameterError(f"parameter {name!r} must be an integer, got {v!r}")
        if base in ("int", "float") and isinstance(v, str):
            raise ParameterError(f"parameter {name!r} must be a number, got the string {v!r}")
        try:
            out = conv(v)
        except (TypeError, ValueError):
            raise ParameterError(f"parameter {name!r} must be of type {base}, got {v!r}") from None
        if p.allowed is not None and out not in p.allowed:
            raise ParameterError(f"parameter {name!r} = {out!r} is not allowed; allowed values: "
                                 f"{', '.join(map(repr, p.allowed))}")
        if p.check is not None and not p.check(out):
            raise ParameterError(f"parameter {name!r} = {out!r} is out of range; allowed: {p.check_text}")
        return out

    if p.kind.startswith("list["):
        if not isinstance(value, (list, tuple)) or len(value) == 0:
            raise ParameterError(f"parameter {name!r} must be a non-empty list of {base}, got {value!r} (a list is "
                                 "written [1, 4, 16] or [relu, cosine])")
        out = [one(v) for v in value]
        repeated = [v for i, v in enumerate(out) if v in out[:i]]
        if p.distinct and repeated:
            raise ParameterError(f"parameter {name!r} = {out!r} gives {repeated[0]!r} more than once; allowed: a "
                                 f"list of distinct values (each value is one point of the sweep)")
        return out
    if isinstance(value, (list, tuple)):
        raise ParameterError(f"parameter {name!r} takes one value of type {base}, got the list {list(value)!r}")
    return one(value)


def fmt(x: Any) -> str:
    """Numbers rounded to 3 significant digits, so printed values are stable across reruns (NumPy loaded lazily:
    ``softmax-icl list`` must start fast)."""
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, (list, tuple)):       # nested lists print flat, as NumPy's ravel would
        flat = []
        stack = [iter(x)]
        while stack:
            for v in stack[-1]:
                if isinstance(v, (list, tuple)):
                    stack.append(iter(v))
                    break
                flat.append(v)
            else:
                stack.pop()
        return "[" + ", ".join(fmt(v) for v in flat) + "]"
    if type(x).__module__ == "numpy":
        import numpy as np

        if isinstance(x, np.ndarray):
            return fmt(x.ravel().tolist())
        if isinstance(x, np.bool_):
            return str(bool(x))
        if isinstance(x, (np.integer, np.floating)):
            return fmt(x.item())
    return str(x)


def validate_device(device: str) -> str:
    ok = device in ("auto", "cpu", "cuda", "mps") or (device.startswith("cuda:") and device[5:].isdigit())
    if not ok:
        raise ParameterError(f"parameter 'device' = {device!r} is not allowed; allowed values: {DEVICE_HELP}")
    return device


# ----------------------------------------------------------------------------------------------
# Shared parameter definitions (each figure picks the ones it needs)


def training_params() -> dict:
    """Pretraining settings shared by the chapters that train M with Adam at the book's batch and evaluation sizes."""
    return {
        "batch_size": Param("int", {"smoke": 64, "default": 128, "paper": 512}, "tasks per step per configuration",
                            check=positive, check_text="an integer >= 1"),
        "lr": Param("float", {"default": 0.1}, "Adam learning rate", check=positive, check_text="a number > 0"),
        "param": Param("str", {"default": "KQ"}, "trainable object: M directly or M = M_K^T M_Q",
                       allowed=("M", "KQ")),
        "eval_tasks": Param("int", {"smoke": 2000, "default": 10000, "paper": 50000},
                            "tasks in the fixed evaluation set", check=positive, check_text="an integer >= 1",
                            source="spec"),
    }


#: The seed pool of the book's runs: the offset they add to the profile value of every ``*_seed`` parameter. It is a
#: fresh pool, which no earlier committed run used; the earlier pool (offset 0: the profile values themselves) becomes
#: one of the seed audit's sets (:mod:`softmax_icl.book.audit`), and the audit's fresh sets lie above it, at
#: ``BOOK_POOL + 1000 k``.
BOOK_POOL = 10000


def seed_params() -> dict:
    return {
        "seeds": Param("int", {"smoke": 2, "default": 3, "paper": 5}, "independent pretraining runs per configuration",
                       **min_seeds()),
        "data_seed": Param("int", {"default": 0}, "seed of the pretraining task streams", check=non_negative, pool=True,
                           check_text="an integer >= 0"),
        "init_seed": Param("int", {"default": 1}, "seed of the initial weights", check=non_negative, pool=True,
                           check_text="an integer >= 0"),
        "eval_seed": Param("int", {"default": 3}, "seed of the fixed evaluation set", check=non_negative, pool=True,
                           check_text="an integer >= 0"),
    }

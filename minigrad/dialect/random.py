"""Random tensors, PyTorch's spellings: ``Generator``, ``generator=``, ``randn``, ``rand``, ``randint``,
``randperm``, ``multinomial``, ``normal_``, ``uniform_``, ``manual_seed``.

Every draw minigrad makes comes from a generator: the one passed as
``generator=`` (a ``mg.Generator``, or a ``np.random.Generator``; ``rng=`` is the
same argument under NumPy's name), else the default generator, which
``mg.manual_seed(n)`` re-seeds (``default_rng()``; the layer initialisers and
dropout draw from it too). So a script that seeds once, or
passes its own ``Generator``, gets the same numbers every run, as in PyTorch.

The numbers are NumPy's (a PCG64 stream), not PyTorch's: the same seed gives
different draws on the two engines, with the same distribution.

What PyTorch refuses is refused here, never cast: a normal or uniform draw
into an integer or bool dtype (``randn(6, dtype=mg.long)``, ``t.normal_()`` on
an int64 tensor), integers outside what the dtype holds (``randint(300, (4,),
dtype=mg.uint8)``), a negative ``std``, ``a > b``, ``multinomial`` of no weights
or of no samples. Seeds are PyTorch's too: any int in [-2**63, 2**64), a
negative one taken modulo 2**64 (``manual_seed(-1)`` is the seed 2**64 - 1).
"""

from __future__ import annotations

import numpy as np

from .. import inplace as _inplace
from ..tensor import OpError, Tensor
from .creation import check_device, sized
from .dtypes import as_dtype

SEED_RANGE = (-(2 ** 63), 2 ** 64)  # PyTorch's: an int64 or a uint64


class Generator:
    """A random generator: ``g = mg.Generator().manual_seed(2147483647)``, then ``mg.randn(3, generator=g)``."""

    def __init__(self, device=None):
        check_device(device, "Generator")
        self._rng = np.random.default_rng()

    def manual_seed(self, seed: int) -> Generator:
        """Re-seed this generator; returns it, so ``mg.Generator().manual_seed(42)`` is one line."""
        self._rng = np.random.default_rng(seed_value(seed, "Generator.manual_seed"))
        return self

    @property
    def numpy(self) -> np.random.Generator:
        """The NumPy generator behind it (what the draws come from)."""
        return self._rng

    def get_state(self) -> dict:
        return self.numpy.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self.numpy.bit_generator.state = state
        return self


_default = np.random.default_rng(0)  # seeded, so that runs are reproducible out of the box


def default_rng() -> np.random.Generator:
    """The default generator's NumPy generator: what a draw given no ``generator=`` / ``rng=`` uses."""
    return _default


class _DefaultGenerator(Generator):
    """The process's default generator (``default_rng()``), which ``mg.manual_seed`` re-seeds."""

    def __init__(self):
        pass

    def manual_seed(self, seed: int) -> Generator:
        global _default
        _default = np.random.default_rng(seed_value(seed, "manual_seed"))
        return self

    @property
    def numpy(self) -> np.random.Generator:
        return _default


default_generator = _DefaultGenerator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (``mg.randn``..., initialisation, dropout, sampling); returns it."""
    return default_generator.manual_seed(seed)


def seed_value(seed, who: str = "manual_seed") -> int:
    """``seed`` as the non-negative int NumPy seeds with: PyTorch takes [-2**63, 2**64), a negative one mod 2**64."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"{who}: the seed must be an int, as {who}(0); got {type(seed).__name__} {seed!r}")
    if not SEED_RANGE[0] <= int(seed) < SEED_RANGE[1]:
        raise ValueError(f"{who}: the seed must lie in [-2**63, 2**64) (an int64 or a uint64, as in PyTorch); "
                         f"got {seed}")
    return int(seed) % 2 ** 64


def numpy_rng(generator=None, rng=None, who: str = "random") -> np.random.Generator:
    """The NumPy generator to draw from: ``generator=`` or ``rng=`` (either kind), else the default one."""
    if generator is not None and rng is not None:
        raise TypeError(f"{who}: pass generator= or rng=, not both (they are the same argument)")
    chosen = generator if generator is not None else rng
    if chosen is None:
        return _default
    if isinstance(chosen, Generator):
        return chosen.numpy
    if isinstance(chosen, np.random.Generator):
        return chosen
    raise TypeError(f"{who}: generator= takes a mg.Generator (g = mg.Generator().manual_seed(0)) or a "
                    f"np.random.Generator, got {type(chosen).__name__}")


def _size(size: tuple, who: str) -> tuple:
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else tuple(size)
    if not all(isinstance(n, int | np.integer) and not isinstance(n, bool) for n in shape):
        raise TypeError(f"{who}: the size must be ints, as {who}(2, 3) or {who}((2, 3)); got {size!r}")
    if any(n < 0 for n in shape):
        raise ValueError(f"{who}: the size {shape} has a negative dimension; sizes are counts, 0 or more")
    return shape


def _made(who, array, dtype, device, requires_grad) -> Tensor:
    check_device(device, who)
    return Tensor(array.astype(as_dtype(dtype, who) or np.float32, copy=False), requires_grad=requires_grad)


def _floating(dtype: np.dtype, who: str, what: str) -> None:
    """Refuse a continuous distribution's draws into an integer or bool dtype (PyTorch refuses; a cast would
    truncate them: rand's [0, 1) to zeros)."""
    if dtype.kind != "f":
        raise TypeError(f"{who}: {what} are real numbers and {dtype.name} cannot hold them (PyTorch refuses too); "
                        f"use a floating dtype (mg.float32, mg.float64), or mg.randint(low, high, size, "
                        f"dtype=...) for random integers")


def randn(*shape, size=None, generator=None, rng=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard-normal draws of shape ``size`` (float32 unless ``dtype``, a floating one): ``mg.randn(27, 10)``,
    ``mg.randn(size=(27, 10))``."""
    size = sized(shape, size, "randn")
    _floating(as_dtype(dtype, "randn") or np.dtype(np.float32), "randn", "normal draws")
    draws = numpy_rng(generator, rng, "randn").standard_normal(_size(size, "randn"))
    return _made("randn", draws, dtype, device, requires_grad)


def rand(*shape, size=None, generator=None, rng=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform draws in [0, 1) of shape ``size`` (float32 unless ``dtype``, a floating one)."""
    size = sized(shape, size, "rand")
    _floating(as_dtype(dtype, "rand") or np.dtype(np.float32), "rand", "uniform draws in [0, 1)")
    draws = numpy_rng(generator, rng, "rand").random(_size(size, "rand"))
    return _made("rand", draws, dtype, device, requires_grad)


def _like_dtype(input: Tensor, dtype, who: str) -> np.dtype:
    """``input``'s dtype, or ``dtype``: a floating one (PyTorch refuses draws into an integer tensor too)."""
    dtype = as_dtype(dtype, who) or input.dtype
    if dtype.kind != "f":
        raise TypeError(f"{who}: draws are real numbers and {dtype.name} cannot hold them (PyTorch refuses too); "
                        f"write mg.{who}(x, dtype=mg.float32)")
    return dtype


def rand_like(input: Tensor, *, generator=None, rng=None, dtype=None, device=None,
              requires_grad: bool = False) -> Tensor:
    """``rand`` with ``input``'s shape, and its dtype unless ``dtype`` (a floating one):
    ``mg.rand_like(x, dtype=mg.float)``."""
    dtype = _like_dtype(input, dtype, "rand_like")
    return rand(*input.shape, generator=generator, rng=rng, dtype=dtype, device=device, requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator=None, rng=None, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    """``randn`` with ``input``'s shape, and its dtype unless ``dtype`` (a floating one)."""
    dtype = _like_dtype(input, dtype, "randn_like")
    return randn(*input.shape, generator=generator, rng=rng, dtype=dtype, device=device, requires_grad=requires_grad)


def _integers_fit(low: int, high: int, dtype: np.dtype, who: str) -> None:
    """Refuse integers in [low, high) that ``dtype`` cannot all hold exactly (a cast would wrap or round them)."""
    if dtype.kind == "b":
        lo, hi = 0, 1
    elif dtype.kind in "iu":
        lo, hi = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    elif dtype.kind == "f":
        hi = 2 ** (np.finfo(dtype).nmant + 1)  # every integer up to 2**(significand bits) is exact
        lo = -hi
    else:
        raise TypeError(f"{who}: dtype={dtype.name} cannot hold integers; use mg.int64 (the default)")
    if low < lo or high - 1 > hi:
        raise ValueError(f"{who}: {dtype.name} holds the integers [{lo}, {hi}], not all of [{low}, {high - 1}] "
                         f"(PyTorch refuses too); narrow the range or pass a wider dtype (mg.int64, the default)")


def randint(*args, size=None, generator=None, rng=None, dtype=None, device=None, requires_grad=False,
            **bounds) -> Tensor:
    """Integers in [low, high) of shape ``size``: ``mg.randint(high, size)`` or ``mg.randint(low, high, size)``.

    int64 unless ``dtype``: ``mg.randint(0, len(X), (32,), generator=g)`` picks a batch. PyTorch's keywords
    name the bounds too: ``mg.randint(low=0, high=10, size=(3,))``.
    """
    if size is None and args and isinstance(args[-1], tuple | list):
        args, size = args[:-1], args[-1]
    if bounds:
        if set(bounds) - {"low", "high"} or "high" not in bounds or len(args) + len(bounds) > 2 or \
                (args and "low" in bounds):
            raise TypeError(f"randint: write mg.randint(high, size), mg.randint(low, high, size) or "
                            f"mg.randint(low=..., high=..., size=...); got the arguments {args!r} and {bounds!r}")
        args = (*args, *(bounds[k] for k in ("low", "high") if k in bounds))
    if size is None or len(args) not in (1, 2):
        raise TypeError(f"randint: write mg.randint(high, size) or mg.randint(low, high, size), size a tuple such "
                        f"as (32,); got the arguments {args!r} and size={size!r}")
    low, high = (0, args[0]) if len(args) == 1 else args
    if not all(isinstance(n, int | np.integer) and not isinstance(n, bool) for n in (low, high)):
        raise TypeError(f"randint: low and high must be ints, got {low!r} and {high!r}")
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    _integers_fit(int(low), int(high), as_dtype(dtype, "randint") or np.dtype(np.int64), "randint")
    draws = numpy_rng(generator, rng, "randint").integers(low, high, size=_size((size,), "randint"))
    return _made("randint", draws, dtype or np.int64, device, requires_grad)


def randperm(n: int, *, generator=None, rng=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The integers 0 .. n-1 in random order (int64 unless ``dtype``)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise ValueError(f"randperm: n must be an int, 0 or more, got {n!r}")
    dt = as_dtype(dtype, "randperm") or np.dtype(np.int64)
    if dt.kind == "b":
        raise TypeError("randperm: dtype=bool cannot hold a permutation (PyTorch refuses too); use mg.int64")
    _integers_fit(0, max(int(n), 1), dt, "randperm")
    return _made("randperm", numpy_rng(generator, rng, "randperm").permutation(n), dtype or np.int64, device,
                 requires_grad)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None, rng=None) -> Tensor:
    """Indices drawn in proportion to the weights in ``input`` (1-D, or 2-D: one draw set per row); int64.

    ``mg.multinomial(probs, num_samples=1, replacement=True, generator=g).item()`` samples the next character.
    The weights need not sum to 1; they must be non-negative, finite, and not all zero.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int | np.integer):
        raise TypeError(f"multinomial: num_samples must be an int, got {type(num_samples).__name__}")
    if num_samples <= 0:
        raise OpError(f"multinomial: num_samples must be 1 or more, got {num_samples}")
    weights = np.asarray(input.data if isinstance(input, Tensor) else input)
    if weights.dtype.kind not in "fiu":
        raise TypeError(f"multinomial: the weights must be numbers (a float tensor of probabilities), got dtype "
                        f"{weights.dtype}")
    weights = weights.astype(np.float64)
    if weights.ndim not in (1, 2):
        raise OpError(f"multinomial: the weights must be 1-D or 2-D (one row per draw set), got shape {weights.shape}")
    if weights.shape[-1] == 0:
        raise OpError(f"multinomial: the weights have shape {weights.shape}: no category to draw from")
    if not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise OpError("multinomial: the weights must be finite and non-negative (probabilities, or counts)")
    rows = weights.reshape(-1, weights.shape[-1])
    if rows.shape[0]:
        rows = rows / np.maximum(rows.max(axis=-1, keepdims=True), np.finfo(np.float64).tiny)  # (1e308s sum to inf)
    totals = rows.sum(axis=-1, keepdims=True)
    if (totals == 0).any():
        raise OpError("multinomial: a row of weights sums to 0; there is nothing to draw")
    if not replacement and rows.shape[0] and num_samples > (rows > 0).sum(axis=-1).min():
        raise OpError(f"multinomial: cannot draw {num_samples} samples without replacement from a row with fewer "
                      f"non-zero weights; pass replacement=True")
    g = numpy_rng(generator, rng, "multinomial")
    drawn = np.stack([g.choice(rows.shape[-1], size=num_samples, replace=replacement, p=row / total)
                      for row, total in zip(rows, totals[:, 0])] or [np.zeros((0, num_samples), np.int64)])
    return Tensor._wrap(drawn.reshape(weights.shape[:-1] + (num_samples,)).astype(np.int64))


def _into(t: Tensor, who: str) -> None:
    """Refuse a continuous distribution's draws into an integer or bool tensor (PyTorch refuses; a cast truncates)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: fills a Tensor in place, got {type(t).__name__}")
    _floating(np.dtype(t.dtype), who, "its draws")


def normal_check(mean, std, who: str) -> None:
    """PyTorch's rule for N(mean, std**2): std 0 or more."""
    if not std >= 0:
        raise ValueError(f"{who}: std must be 0 or more (PyTorch refuses a negative one), got std={std}")


def uniform_check(a, b, who: str) -> None:
    """PyTorch's rule for U(a, b): finite bounds, a <= b."""
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ValueError(f"{who}: the bounds must be finite, got a={a}, b={b}")
    if a > b:
        raise ValueError(f"{who}: draws lie in [a, b), so a must not exceed b; got a={a} > b={b}: write "
                         f"uniform_({b}, {a})")


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None, rng=None) -> Tensor:
    """Fill ``t`` with draws from N(mean, std**2), in place (``t.normal_(0, 0.02)``); the rules of ``-=``."""
    _into(t, "normal_")
    normal_check(mean, std, "normal_")
    draws = mean + std * numpy_rng(generator, rng, "normal_").standard_normal(t.shape)
    _inplace.setitem(t, Ellipsis, draws.astype(t.dtype))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None, rng=None, **bounds) -> Tensor:
    """Fill ``t`` with draws from U(a, b), in place (PyTorch's ``from=``/``to=`` name the bounds too)."""
    a, b = bounds.pop("from", a), bounds.pop("to", b)
    if bounds:
        raise TypeError(f"uniform_: unexpected argument {next(iter(bounds))!r}; write t.uniform_(a, b)")
    _into(t, "uniform_")
    uniform_check(a, b, "uniform_")
    draws = numpy_rng(generator, rng, "uniform_").uniform(a, b, size=t.shape)
    _inplace.setitem(t, Ellipsis, draws.astype(t.dtype))
    return t

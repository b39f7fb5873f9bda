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
"""

from __future__ import annotations

import numpy as np

from . import inplace as _inplace
from .creation import check_device
from .dtypes import as_dtype
from .tensor import OpError, Tensor


class Generator:
    """A random generator: ``g = mg.Generator().manual_seed(2147483647)``, then ``mg.randn(3, generator=g)``."""

    def __init__(self, device=None):
        check_device(device, "Generator")
        self._rng = np.random.default_rng()

    def manual_seed(self, seed: int) -> Generator:
        """Re-seed this generator; returns it, so ``mg.Generator().manual_seed(42)`` is one line."""
        self._rng = np.random.default_rng(seed)
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
        _default = np.random.default_rng(seed)
        return self

    @property
    def numpy(self) -> np.random.Generator:
        return _default


default_generator = _DefaultGenerator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (``mg.randn``..., initialisation, dropout, sampling); returns it."""
    return default_generator.manual_seed(seed)


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
    if not all(isinstance(n, int | np.integer) for n in shape):
        raise TypeError(f"{who}: the size must be ints, as {who}(2, 3) or {who}((2, 3)); got {size!r}")
    return shape


def _made(who, array, dtype, device, requires_grad) -> Tensor:
    check_device(device, who)
    return Tensor(array.astype(as_dtype(dtype, who) or np.float32, copy=False), requires_grad=requires_grad)


def randn(*size, generator=None, rng=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard-normal draws of shape ``size`` (float32 unless ``dtype``): ``mg.randn(27, 10, generator=g)``."""
    draws = numpy_rng(generator, rng, "randn").standard_normal(_size(size, "randn"))
    return _made("randn", draws, dtype, device, requires_grad)


def rand(*size, generator=None, rng=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform draws in [0, 1) of shape ``size`` (float32 unless ``dtype``)."""
    draws = numpy_rng(generator, rng, "rand").random(_size(size, "rand"))
    return _made("rand", draws, dtype, device, requires_grad)


def randint(*args, size=None, generator=None, rng=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Integers in [low, high) of shape ``size``: ``mg.randint(high, size)`` or ``mg.randint(low, high, size)``.

    int64 unless ``dtype``: ``mg.randint(0, len(X), (32,), generator=g)`` picks a batch.
    """
    if size is None and args and isinstance(args[-1], tuple | list):
        args, size = args[:-1], args[-1]
    if size is None or len(args) not in (1, 2):
        raise TypeError(f"randint: write mg.randint(high, size) or mg.randint(low, high, size), size a tuple such "
                        f"as (32,); got the arguments {args!r} and size={size!r}")
    low, high = (0, args[0]) if len(args) == 1 else args
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    draws = numpy_rng(generator, rng, "randint").integers(low, high, size=_size((size,), "randint"))
    return _made("randint", draws, dtype or np.int64, device, requires_grad)


def randperm(n: int, *, generator=None, rng=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The integers 0 .. n-1 in random order (int64 unless ``dtype``)."""
    return _made("randperm", numpy_rng(generator, rng, "randperm").permutation(n), dtype or np.int64, device,
                 requires_grad)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None, rng=None) -> Tensor:
    """Indices drawn in proportion to the weights in ``input`` (1-D, or 2-D: one draw set per row); int64.

    ``mg.multinomial(probs, num_samples=1, replacement=True, generator=g).item()`` samples the next character.
    The weights need not sum to 1; they must be non-negative, finite, and not all zero.
    """
    weights = np.asarray(input.data if isinstance(input, Tensor) else input, dtype=np.float64)
    if weights.ndim not in (1, 2):
        raise OpError(f"multinomial: the weights must be 1-D or 2-D (one row per draw set), got shape {weights.shape}")
    if not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise OpError("multinomial: the weights must be finite and non-negative (probabilities, or counts)")
    rows = weights.reshape(-1, weights.shape[-1])
    totals = rows.sum(axis=-1, keepdims=True)
    if (totals == 0).any():
        raise OpError("multinomial: a row of weights sums to 0; there is nothing to draw")
    if not replacement and num_samples > (rows > 0).sum(axis=-1).min():
        raise OpError(f"multinomial: cannot draw {num_samples} samples without replacement from a row with fewer "
                      f"non-zero weights; pass replacement=True")
    g = numpy_rng(generator, rng, "multinomial")
    drawn = np.stack([g.choice(rows.shape[-1], size=num_samples, replace=replacement, p=row / total)
                      for row, total in zip(rows, totals[:, 0])])
    return Tensor._wrap(drawn.reshape(weights.shape[:-1] + (num_samples,)).astype(np.int64))


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None, rng=None) -> Tensor:
    """Fill ``t`` with draws from N(mean, std**2), in place (``t.normal_(0, 0.02)``); the rules of ``-=``."""
    draws = mean + std * numpy_rng(generator, rng, "normal_").standard_normal(t.shape)
    _inplace.setitem(t, Ellipsis, draws.astype(t.dtype))
    return t


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None, rng=None, **bounds) -> Tensor:
    """Fill ``t`` with draws from U(a, b), in place (PyTorch's ``from=``/``to=`` name the bounds too)."""
    a, b = bounds.pop("from", a), bounds.pop("to", b)
    if bounds:
        raise TypeError(f"uniform_: unexpected argument {next(iter(bounds))!r}; write t.uniform_(a, b)")
    draws = numpy_rng(generator, rng, "uniform_").uniform(a, b, size=t.shape)
    _inplace.setitem(t, Ellipsis, draws.astype(t.dtype))
    return t


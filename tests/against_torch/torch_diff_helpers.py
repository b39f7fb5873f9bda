"""Shared pieces of the differential tests against PyTorch (tests/against_torch/test_torch_diff_*.py).

* hypothesis strategies for inputs: shapes with 0-d and zero-size cases, float32
  and float64 arrays salted with special values (0, -0, +-tiny, +-huge, +-inf,
  NaN), and the layouts a tensor can have (contiguous, transposed, strided);
* ``run_both``: the same function on minigrad and on PyTorch, forward and
  backward, with PyTorch in float64 as the reference for float32 inputs;
* ``assert_agrees``: the comparison rule, written once.

The comparison rule. NaN must appear exactly where the reference has NaN, and
an infinity exactly where the reference (rounded to our dtype) has the same
infinity. Finite values must be within ``rtol`` of the float64 reference,
measured against ``|reference| + scale`` (``scale`` is the size of the terms
that were added, for sums, where float32 cancellation is unavoidable); where
that fails, an element still passes if it is close to PyTorch's own result in
our dtype, or closer to the reference than that result: minigrad must be at
least as good as PyTorch, not better than float arithmetic allows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigrad as mg

torch = None  # set by each test module through importorskip, so the suite skips cleanly without PyTorch


def use_torch(module) -> None:
    global torch
    torch = module


DTYPES = (np.float32, np.float64)
RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-10}


def specials(dtype) -> list[float]:
    info = np.finfo(dtype)
    return [0.0, -0.0, float(info.tiny), -float(info.tiny), float(info.max) / 2, -float(info.max) / 2,
            np.inf, -np.inf, np.nan, 1.0, -1.0]


def elements(dtype, special: bool = True, lo: float = -4.0, hi: float = 4.0):
    """Ordinary values, and (``special``) the special ones, as hypothesis elements of ``dtype``."""
    width = 32 if np.dtype(dtype) == np.float32 else 64
    plain = st.floats(lo, hi, width=width)
    return st.one_of(plain, st.sampled_from(specials(dtype))) if special else plain


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 4):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


@st.composite
def arrays(draw, dtype=None, shape=None, special: bool = True, lo: float = -4.0, hi: float = 4.0):
    dtype = draw(st.sampled_from(DTYPES)) if dtype is None else dtype
    shape = draw(shapes()) if shape is None else shape
    return draw(hnp.arrays(dtype, shape, elements=elements(dtype, special, lo, hi)))


LAYOUTS = ("contiguous", "transposed", "strided")


def view(x, layout: str):
    """The same view on either library: as is, all axes reversed, or every other element of a doubled last axis.

    ``layout`` is applied to a base built by ``base_for``, so the view has the
    caller's shape and values but not a contiguous layout.
    """
    if layout == "transposed" and x.ndim >= 2:
        return x.permute(*reversed(range(x.ndim))) if hasattr(x, "grad_fn") else x.transpose()
    if layout == "strided" and x.ndim >= 1:
        return x[..., ::2]
    return x


def base_for(array: np.ndarray, layout: str) -> np.ndarray:
    """The array to build a leaf from, so that ``view(leaf, layout)`` shows ``array``."""
    if layout == "transposed" and array.ndim >= 2:
        return np.ascontiguousarray(array.transpose())
    if layout == "strided" and array.ndim >= 1:
        doubled = np.repeat(array, 2, axis=-1)
        doubled[..., 1::2] = 7.0  # never seen: the view skips them
        return doubled
    return array


def leaves(arrays_, layout: str = "contiguous"):
    """(minigrad leaves, their views, torch float64 leaves, their views, torch same-dtype leaves, their views)."""
    ours = [mg.Tensor(base_for(a, layout), requires_grad=True) for a in arrays_]
    ref = [torch.tensor(base_for(a, layout).astype(np.float64), requires_grad=True) for a in arrays_]
    same = [torch.tensor(base_for(a, layout), requires_grad=True) for a in arrays_]
    return ours, [view(t, layout) for t in ours], ref, [view(t, layout) for t in ref], same, \
        [view(t, layout) for t in same]


def to_numpy(t) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t.data if isinstance(t, mg.Tensor) else t)


def assert_agrees(ours, ref, same=None, dtype=None, rtol=None, scale=0.0, what: str = "value", better=None):
    """``ours`` (minigrad, in ``dtype``) against ``ref`` (float64 reference) and ``same`` (PyTorch in ``dtype``).

    ``better``: a mask of elements where minigrad may be finite where PyTorch gives NaN (a documented
    improvement, such as silu's gradient at +-inf).
    """
    ours = to_numpy(ours)
    dtype = np.dtype(dtype or ours.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = to_numpy(ref).astype(np.float64)
        rounded = ref.astype(dtype).astype(np.float64)  # overflow rounds to inf, as our dtype must
        same = None if same is None else to_numpy(same).astype(np.float64)
    assert ours.dtype == dtype, f"{what}: dtype {ours.dtype}, expected {dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {ours.shape}, reference {ref.shape}"
    ours = ours.astype(np.float64)
    rtol = RTOL[dtype] if rtol is None else rtol
    scale = np.broadcast_to(np.abs(np.asarray(scale, dtype=np.float64)), ref.shape)

    def close(expected):
        with np.errstate(invalid="ignore", over="ignore"):
            both_nan = np.isnan(ours) & np.isnan(expected)
            same_inf = np.isinf(ours) & (ours == expected)
            finite = np.isfinite(ours) & np.isfinite(expected)
            tol = rtol * (np.abs(expected) + np.where(np.isfinite(scale), scale, 0.0)) \
                + 8 * np.finfo(dtype).smallest_subnormal
            near = finite & (np.abs(ours - expected) <= tol)
        return both_nan | same_inf | near

    ok = close(rounded) | close(ref)
    if better is not None:
        ok |= np.broadcast_to(better, ok.shape) & np.isnan(ref) & np.isfinite(ours)
    if same is not None:
        ok |= close(same)
        with np.errstate(invalid="ignore", over="ignore"):  # at least as close to the truth as PyTorch's own result
            ok |= np.isfinite(ours) & np.isfinite(same) & (np.abs(ours - ref) <= np.abs(same - ref))
    if not ok.all():
        bad = np.argwhere(~ok)[:5]
        detail = "; ".join(f"at {tuple(i)}: ours {ours[tuple(i)]!r}, reference {ref[tuple(i)]!r}"
                           + ("" if same is None else f", PyTorch {dtype} {same[tuple(i)]!r}") for i in bad)
        raise AssertionError(f"{what} disagrees with PyTorch in {int((~ok).sum())} of {ok.size} elements ({dtype}): "
                             f"{detail}")


def upstream_like(shape, dtype, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def check_function(ours_fn, torch_fn, arrays_, layout="contiguous", seed=0, rtol=None, value_scale=0.0,
                   grad_scale=None, grads=True, out_dtype=None, better=None):
    """Run ``ours_fn`` and ``torch_fn`` on the same inputs (views per ``layout``); compare values and gradients.

    ``grad_scale``: a function (inputs as float64 arrays, upstream) -> the scale of each input's gradient
    terms, or None (the upstream's own size, 1).
    """
    ours, our_views, ref, ref_views, same, same_views = leaves(arrays_, layout)
    dtype = arrays_[0].dtype
    out_dtype = dtype if out_dtype is None else np.dtype(out_dtype)
    out = ours_fn(*our_views)
    expected = torch_fn(*ref_views)
    with np.errstate(all="ignore"):
        same_out = torch_fn(*same_views)
    assert_agrees(out, expected, same_out, dtype=out_dtype, rtol=rtol, scale=value_scale, what="forward",
                  better=None if better is None else better(arrays_[0]))
    if not grads or not out.requires_grad:
        return
    g = upstream_like(out.shape, dtype, seed)
    out.backward(g)
    expected.backward(torch.from_numpy(g.astype(np.float64)))
    same_out.backward(torch.from_numpy(g))
    for i, (x, r, s) in enumerate(zip(ours, ref, same)):
        if r.grad is None:  # not differentiated (a constant operand): neither side has a gradient
            assert x.grad is None, f"input {i}: PyTorch has no gradient for it, minigrad has one"
            continue
        assert x.grad is not None and x.grad.dtype == x.dtype and x.grad.shape == x.shape, \
            f"input {i}: grad {None if x.grad is None else (x.grad.shape, x.grad.dtype)} for a leaf {x.shape} {x.dtype}"
        scale = 1.0 if grad_scale is None else grad_scale(i, [a.astype(np.float64) for a in arrays_], g)
        r_grad = r.grad if r.grad is not None else torch.zeros_like(r)
        s_grad = s.grad if s.grad is not None else torch.zeros_like(s)
        assert_agrees(x.grad, r_grad, s_grad, dtype=dtype, rtol=rtol, scale=base_for_scale(scale, arrays_[i], layout),
                      what=f"gradient of input {i}",
                      better=None if better is None else better(base_for(arrays_[i], layout)))


def base_for_scale(scale, array, layout):
    """A per-element gradient scale laid out like the leaf (whose shape is the base's, not the view's)."""
    scale = np.asarray(scale, dtype=np.float64)
    if scale.ndim == 0:
        return scale
    return base_for(np.broadcast_to(scale, array.shape).copy(), layout)

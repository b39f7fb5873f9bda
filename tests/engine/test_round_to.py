"""x.round_to(format): bfloat16 and float16 emulated on float32 (and float64) arrays, round to nearest with
ties to even on the bit pattern, float16's range and subnormals; equal bit for bit to PyTorch's casts; the
gradient held in the same format (so float16 gradients underflow, as they do on a GPU)."""

import numpy as np
import pytest

import minigrad as mg

# Known roundings: ties go to the even last bit; float16 overflows past 65504 and flushes below 2**-25.
BF16_ULP_AT_1 = 2.0 ** -7
KNOWN = [
    ("bfloat16", 1 + 2.0 ** -8, 1.0),  # halfway between 1 and 1 + 2**-7: to the even one, 1
    ("bfloat16", 1 + 3 * 2.0 ** -8, 1 + 2 * BF16_ULP_AT_1),  # halfway again: up to the even one
    ("bfloat16", 1 + 2.0 ** -8 + 2.0 ** -20, 1 + BF16_ULP_AT_1),  # past halfway: up
    ("bfloat16", 3.4e38, np.inf),
    ("float16", 65504.0, 65504.0),
    ("float16", 65519.0, 65504.0),
    ("float16", 65520.0, np.inf),  # halfway to 65536, which float16 cannot hold
    ("float16", 2.0 ** -24, 2.0 ** -24),  # the smallest subnormal
    ("float16", 2.0 ** -25, 0.0),  # halfway to it: to the even one, 0
    ("float16", 1.5 * 2.0 ** -25, 2.0 ** -24),
    ("float16", 1e-3, 0.0010004043579101562),
]


@pytest.mark.parametrize("fmt, x, want", KNOWN)
def test_round_to_rounds_to_nearest_even_with_the_formats_range(fmt, x, want):
    got = mg.tensor(np.array([x, -x], dtype=np.float32)).round_to(fmt).numpy()
    assert got.dtype == np.float32
    assert got[0] == want and got[1] == -want


def every_float32(rng) -> np.ndarray:
    """Random float32s over every exponent, with infinities, NaN, signed zeros and the largest values."""
    mantissas = rng.integers(0, 2 ** 23, 200_000, dtype=np.uint32)
    exponents = rng.integers(0, 255, 200_000, dtype=np.uint32)
    signs = rng.integers(0, 2, 200_000, dtype=np.uint32)
    bits = (signs << 31) | (exponents << 23) | mantissas
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.4028235e38, 65504, 65520], dtype=np.float32)
    return np.concatenate([bits.view(np.float32), special])


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_round_to_equals_pytorchs_cast_bit_for_bit(fmt):
    torch = pytest.importorskip("torch")
    x = every_float32(np.random.default_rng(0))
    got = mg.tensor(x).round_to(fmt).numpy()
    with np.errstate(all="ignore"):
        want = torch.from_numpy(x).to(getattr(torch, fmt)).float().numpy()
    assert np.array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()
    x64 = np.random.default_rng(1).standard_normal(10_000) * 2.0 ** np.random.default_rng(2).integers(-30, 30, 10_000)
    want64 = torch.from_numpy(x64).to(getattr(torch, fmt)).double().numpy()  # float64 goes through float32
    assert np.array_equal(mg.tensor(x64).round_to(fmt).numpy(), want64)


def test_round_to_holds_the_gradient_in_the_format_too():
    w = mg.tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    small = mg.tensor(np.array([1e-9, 1e-6, 1.0], dtype=np.float32))
    (g16,) = mg.grad((w.round_to("float16") * small).sum(), [w])
    (gbf,) = mg.grad((w.round_to("bfloat16") * small).sum(), [w])
    assert g16.numpy().tolist() == [0.0, np.float32(np.float16(1e-6)), 1.0]  # 1e-9: below 2**-24, gone
    assert gbf.numpy()[0] == np.float32(mg.tensor(np.float32(1e-9)).round_to("bfloat16").item())  # bf16 keeps it
    assert g16.dtype == np.float32


def test_round_to_names_the_formats_it_knows():
    with pytest.raises(mg.OpError, match="round_to: fmt must be 'bfloat16', 'float16'"):
        mg.tensor([1.0]).round_to("fp8")
    assert mg.tensor(np.float64(1 / 3)).round_to("float32").item() == float(np.float32(1 / 3))


def test_round_to_rounds_float64_through_float32_as_pytorchs_cast():
    # Next to a tie the two roundings differ from one: float32 drops the 2**-40 and leaves an exact tie
    # between 1 and 1 + 2**-10 (float16) or 1 and 1 + 2**-7 (bfloat16), which goes to the even one, 1.
    for fmt, x in (("float16", 1 + 2.0 ** -11 + 2.0 ** -40), ("bfloat16", 1 + 2.0 ** -8 + 2.0 ** -40)):
        got = mg.tensor(np.array([x, -x])).round_to(fmt).numpy()
        assert got.dtype == np.float64 and got.tolist() == [1.0, -1.0], fmt


@pytest.mark.parametrize("fmt", ["bfloat16", "float16"])
def test_round_to_float64_next_to_ties_equals_pytorchs_cast(fmt):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    kept = {"bfloat16": 8, "float16": 11}[fmt]  # significant bits
    # values of the format, plus half an ulp (a tie in float32), nudged by a float64-only amount either way
    base = np.ldexp(1.0 + rng.integers(0, 2 ** (kept - 1), 2000) / 2 ** (kept - 1), rng.integers(-10, 10, 2000))
    half_ulp = np.ldexp(1.0, np.frexp(base)[1] - 1 - kept)
    nudge = half_ulp * 2.0 ** -30 * rng.choice([-1.0, 1.0], 2000)
    x = np.concatenate([base + half_ulp + nudge, -(base + half_ulp + nudge)])
    want = torch.from_numpy(x).to(getattr(torch, fmt)).double().numpy()
    assert np.array_equal(mg.tensor(x).round_to(fmt).numpy(), want)

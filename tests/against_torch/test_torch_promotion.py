"""Type promotion is PyTorch's: the result dtype of a mixed-dtype op is ``torch.result_type``'s.

NumPy promotes float32 with int64 to float64; PyTorch keeps float32 (the category decides, then only
the dtypes of that category meet), and a 0-d tensor or a Python number only raises the dtype when it
is of a higher category. Each row runs one expression on both engines, over every pair of dtypes, and
compares dtype, value and (where a float input requires grad) the gradient's dtype.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import minigrad as mg

torch = pytest.importorskip("torch")

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]
SHAPES = {"dim": (3,), "0-d": ()}


def _value(engine, dtype: str, shape: tuple, seed: int):
    data = np.random.default_rng(seed).uniform(1.0, 4.0, size=shape)
    data = data > 2.0 if dtype == "bool" else data.astype(dtype)
    return mg.tensor(data) if engine is mg else torch.tensor(data)


CASES = [(op, a, sa, b, sb) for op in ("+", "*", "-", "/", "maximum", "where", "cat")
         for a, b in itertools.product(DTYPES, DTYPES) for sa in SHAPES for sb in SHAPES
         if not (op == "cat" and (sa, sb) != ("dim", "dim"))]


def _run(engine, op, a, b):
    if op == "maximum":
        return engine.maximum(a, b)
    if op == "where":
        return engine.where(_value(engine, "bool", (3,), 7), a, b)
    if op == "cat":
        return engine.cat([a, b])
    return eval(f"a {op} b", {"a": a, "b": b})  # noqa: S307


@pytest.mark.parametrize("op, a, sa, b, sb", CASES, ids=["-".join(c) for c in CASES])
def test_mixed_dtypes_promote_as_pytorch(op, a, sa, b, sb):
    inputs = {engine: (_value(engine, a, SHAPES[sa], 0), _value(engine, b, SHAPES[sb], 1)) for engine in (mg, torch)}
    try:
        want = _run(torch, op, *inputs[torch])
    except RuntimeError:  # (a bool tensor minus anything: PyTorch refuses, and so does minigrad)
        with pytest.raises(mg.OpError, match="to invert a mask write ~mask"):
            _run(mg, op, *inputs[mg])
        return
    got = _run(mg, op, *inputs[mg])
    assert str(got.dtype) == str(want.dtype).replace("torch.", ""), f"{got.dtype}, PyTorch's {want.dtype}"
    np.testing.assert_allclose(got.data.astype(float), want.numpy().astype(float), rtol=1e-3)


@pytest.mark.parametrize("number", [2, 0.5, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_python_numbers_take_the_tensors_dtype_unless_of_a_higher_category(dtype, number):
    a, t = _value(mg, dtype, (3,), 0), _value(torch, dtype, (3,), 0)
    for code in ("a * n", "n * a", "a + n", "a / n"):
        got, want = eval(code, {"a": a, "n": number}), eval(code, {"a": t, "n": number})  # noqa: S307
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), (code, got.dtype, want.dtype)


def test_a_float32_model_input_stays_float32_through_an_int64_power():
    # The tutorial line x.unsqueeze(-1).pow(torch.tensor([1, 2, 3])) feeds a float32 Linear.
    x = mg.linspace(-1, 1, 5, requires_grad=True)
    features = x.unsqueeze(-1).pow(mg.tensor([1, 2, 3]))
    assert features.dtype == mg.float32
    out = mg.nn.Linear(3, 1)(features)
    out.sum().backward()
    assert x.grad.dtype == mg.float32
    tx = torch.linspace(-1, 1, 5, requires_grad=True)
    assert tx.unsqueeze(-1).pow(torch.tensor([1, 2, 3])).dtype == torch.float32


def test_the_gradient_flows_back_in_each_inputs_own_dtype():
    a = mg.tensor([1.0, 2.0], dtype=mg.float32, requires_grad=True)
    b = mg.tensor([3.0, 4.0], dtype=mg.float64, requires_grad=True)
    (a * b).sum().backward()
    ta = torch.tensor([1.0, 2.0], dtype=torch.float32, requires_grad=True)
    tb = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    (ta * tb).sum().backward()
    assert a.grad.dtype == mg.float32 and b.grad.dtype == mg.float64
    np.testing.assert_allclose(a.grad.data, ta.grad.numpy())
    np.testing.assert_allclose(b.grad.data, tb.grad.numpy())

"""einsum: NumPy's values for the common forms, and clear errors for the ones it does not take.

Its gradients are checked with every other op's (first and second order) from
the samples in the op table.
"""

from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("subscripts, shapes", [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),  # attention scores
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: "ik"
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...i,...i->i", [(2, 3, 4), (1, 3, 4)]),  # summed over the ellipsis axes, which NumPy alone does not do
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]),  # uppercase labels
])
def test_einsum_matches_numpy(subscripts, shapes):
    arrays = [RNG.standard_normal(shape).astype(np.float32) for shape in shapes]
    got = mg.einsum(subscripts, *[mg.tensor(a) for a in arrays])
    if subscripts == "...i,...i->i":
        expected = (arrays[0] * arrays[1]).sum(axis=(0, 1))
    else:
        expected = np.einsum(subscripts, *arrays)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.data, expected, rtol=1e-5, atol=1e-5)


def test_einsum_gradient_of_a_broadcast_operand_is_summed_back():
    a = mg.tensor(RNG.standard_normal((2, 1, 4)), requires_grad=True)
    b = mg.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    mg.einsum("...i,...i->...", a, b).sum().backward()
    np.testing.assert_allclose(a.grad.data, np.broadcast_to(b.data.sum(0), (2, 1, 4)))
    np.testing.assert_allclose(b.grad.data, np.broadcast_to(a.data.sum((0, 1)), (3, 4)))


@pytest.mark.parametrize("subscripts, shapes, message", [
    ("ii->i", [(3, 3)], "repeated within one operand"),
    ("ij,jk->ik", [(3, 4)], "name 2 operand"),
    ("ijk->i", [(3, 4)], "does not fit an operand of shape"),
    ("i1->i", [(3, 4)], "labels are letters"),
    ("ij,jk->ik", [(3, 4), (5, 6)], "einsum"),  # NumPy's own size check, under the op's name
])
def test_einsum_rejects_what_it_cannot_do_by_name(subscripts, shapes, message):
    with pytest.raises(mg.OpError, match=message) as caught:
        mg.einsum(subscripts, *[mg.tensor(np.ones(shape)) for shape in shapes])
    assert str(caught.value).startswith("einsum:")

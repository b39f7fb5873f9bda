"""Random draws refuse what PyTorch refuses, with a message saying what to write, and never cast a draw into a
dtype that cannot hold it: normal/uniform draws into integers or bool, integers outside the dtype's range; the
bounds of normal_/uniform_, multinomial's weights and sample count, and the seeds PyTorch accepts."""

import numpy as np
import pytest

import minigrad as mg

REFUSED = [  # (call, error type, words of the message)
    ("mg.randn(6, dtype=mg.long)", TypeError, "randn: normal draws are real numbers and int64 cannot hold them"),
    ("mg.rand(6, dtype=mg.int64)", TypeError, "rand: uniform draws .* use a floating dtype"),
    ("mg.randn(2, dtype=mg.bool)", TypeError, "bool cannot hold them"),
    ("mg.randint(-5, 0, (3,), dtype=mg.uint8)", ValueError, r"uint8 holds the integers \[0, 255\], not all of \[-5"),
    ("mg.randint(300, (3,), dtype=mg.uint8)", ValueError, r"randint: uint8 holds .* not all of \[0, 299\].*mg.int64"),
    ("mg.randint(0, 3, (2,), dtype=mg.bool)", ValueError, r"bool holds the integers \[0, 1\]"),
    ("mg.randint(0, 2 ** 20, (2,), dtype=mg.float16)", ValueError, r"float16 holds the integers \[-2048, 2048\]"),
    ("mg.randint(5.5, (2,))", TypeError, "randint: low and high must be ints"),
    ("mg.randperm(300, dtype=mg.uint8)", ValueError, "randperm: uint8 holds"),
    ("mg.randperm(3, dtype=mg.bool)", TypeError, "randperm: dtype=bool cannot hold a permutation"),
    ("mg.randperm(-1)", ValueError, "randperm: n must be an int, 0 or more"),
    ("mg.randn(2, -1)", ValueError, r"randn: the size \(2, -1\) has a negative dimension"),
    ("mg.zeros(6, dtype=mg.long).normal_()", TypeError, "normal_: its draws are real numbers and int64 cannot"),
    ("mg.zeros(6, dtype=mg.long).uniform_()", TypeError, "uniform_: its draws are real numbers"),
    ("mg.zeros(6).normal_(0, -1)", ValueError, "normal_: std must be 0 or more"),
    ("mg.zeros(6).uniform_(1, 0)", ValueError, r"must not exceed b; got a=1 > b=0: write uniform_\(0, 1\)"),
    ("mg.zeros(6).uniform_(0, float('inf'))", ValueError, "uniform_: the bounds must be finite"),
    ("mg.nn.init.normal_(mg.zeros(3, dtype=mg.long))", TypeError, "nn.init.normal_: draws real numbers"),
    ("mg.nn.init.normal_(mg.zeros(3), 0.0, -1.0)", ValueError, "nn.init.normal_: std must be 0 or more"),
    ("mg.nn.init.uniform_(mg.zeros(3, dtype=mg.bool))", TypeError, "nn.init.uniform_: draws real numbers"),
    ("mg.multinomial(mg.tensor([]), 1)", mg.OpError, r"multinomial: the weights have shape \(0,\): no category"),
    ("mg.multinomial(mg.ones(2, 0), 1)", mg.OpError, "no category to draw from"),
    ("mg.multinomial(mg.tensor([0.5, 0.5]), 0)", mg.OpError, "multinomial: num_samples must be 1 or more, got 0"),
    ("mg.multinomial(mg.tensor([0.5, 0.5]), 1.5)", TypeError, "multinomial: num_samples must be an int"),
    ("mg.manual_seed(2 ** 64)", ValueError, r"manual_seed: the seed must lie in \[-2\*\*63, 2\*\*64\)"),
    ("mg.manual_seed(1.5)", TypeError, "manual_seed: the seed must be an int"),
]


@pytest.mark.parametrize("call, error, words", REFUSED, ids=[c for c, _, _ in REFUSED])
def test_a_draw_pytorch_refuses_is_refused_with_what_to_write(call, error, words):
    with pytest.raises(error, match=words):
        eval(call)  # noqa: S307


def test_draws_that_fit_their_dtype_are_made():
    assert mg.randint(0, 256, (50,), dtype=mg.uint8).numpy().max() <= 255
    assert mg.randint(-128, 128, (5,), dtype=mg.int8).dtype == np.int8
    assert mg.randint(0, 2, (5,), dtype=mg.bool).dtype == np.bool_
    assert sorted(mg.randperm(256, dtype=mg.uint8).tolist()) == list(range(256))
    assert mg.rand(3, dtype=mg.float64).dtype == np.float64 and mg.randperm(0).shape == (0,)
    assert (mg.zeros(3).normal_(2.0, 0.0).numpy() == 2.0).all()  # std 0: the mean, as in PyTorch
    g = mg.Generator().manual_seed(0)
    by_keywords = mg.randint(low=5, high=9, size=(40,), generator=g).numpy()  # PyTorch's keywords
    assert by_keywords.min() >= 5 and by_keywords.max() < 9 and mg.randint(high=2, size=(2, 3)).shape == (2, 3)
    with pytest.raises(TypeError, match=r"randint: write .* or mg.randint\(low=..., high=..., size=...\)"):
        mg.randint(10, size=(3,), low=2)  # low after high: PyTorch refuses it too


def test_multinomial_of_huge_weights_and_of_no_rows():
    drawn = mg.multinomial(mg.tensor(np.array([1e308, 0.0, 1e308])), 200, replacement=True).numpy()
    assert set(drawn.tolist()) == {0, 2}  # the sum overflows float64; the draw is still in proportion
    assert mg.multinomial(mg.zeros(0, 3), 1).shape == (0, 1)  # no rows: no draws, as in PyTorch


def test_manual_seed_takes_pytorchs_seeds_a_negative_one_modulo_2_64():
    mg.manual_seed(-1)
    a = mg.randn(4).numpy()
    mg.manual_seed(2 ** 64 - 1)
    assert np.array_equal(mg.randn(4).numpy(), a)
    g = mg.Generator().manual_seed(-(2 ** 63))
    assert np.array_equal(mg.randn(3, generator=g).numpy(),
                          mg.randn(3, generator=mg.Generator().manual_seed(2 ** 63)).numpy())
    mg.manual_seed(0)


CALLS_AGAINST_TORCH = [c for c, _, _ in REFUSED if "OpError" not in c and "nn.init" not in c] + [
    "T.randint(0, 256, (3,), dtype=T.uint8)", "T.randint(0, 2, (3,), dtype=T.bool)", "T.randperm(256, dtype=T.uint8)",
    "T.zeros(3).normal_(0, 0)", "T.manual_seed(-1)", "T.manual_seed(2 ** 64 - 1)", "T.manual_seed(-2 ** 63)",
    "T.multinomial(T.zeros(0, 3), 1)", "T.randint(low=0, high=10, size=(3,))", "T.randint(high=10, size=(3,))",
    "T.randint(10, size=(3,), low=2)", "T.multinomial(T.tensor([1e308, 1e308], dtype=T.float64), 1)",
]


@pytest.mark.parametrize("call", CALLS_AGAINST_TORCH)
def test_refused_and_accepted_as_by_pytorch(call):
    torch = pytest.importorskip("torch")
    code = call.replace("mg.", "T.").replace("T.OpError", "ValueError")
    if "1.5" in code and "manual_seed" in code:
        pytest.skip("PyTorch truncates a float seed; minigrad asks for an int")
    outcomes = []
    for T in (torch, mg):
        try:
            eval(code, {"T": T})  # noqa: S307
            outcomes.append("made")
        except Exception:  # noqa: BLE001  (which engine refuses is compared; the messages are tested above)
            outcomes.append("refused")
    torch.manual_seed(0)
    mg.manual_seed(0)
    assert outcomes[1] == outcomes[0], f"{code}: PyTorch {outcomes[0]}, minigrad {outcomes[1]}"

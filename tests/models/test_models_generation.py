"""models.generation: temperature, top-k, top-p, greedy, and the shared decoding loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import nn
from models import generation as gen

LOGITS = np.log(np.array([[0.5, 0.2, 0.15, 0.1, 0.05]]))  # token probabilities 0.5, 0.2, 0.15, 0.1, 0.05


def frequencies(logits, n=20000, seed=0, **options):
    rng = np.random.default_rng(seed)
    draws = gen.sample_next(np.repeat(logits, n, axis=0), rng=rng, **options)
    return np.bincount(draws, minlength=logits.shape[-1]) / n


def test_greedy_takes_the_argmax_of_each_row():
    logits = np.array([[0.1, 3.0, -1.0], [5.0, 0.0, 4.9]])
    np.testing.assert_array_equal(gen.sample_next(logits, temperature=0.0), [1, 0])
    np.testing.assert_array_equal(gen.sample_next(mg.Tensor(logits), temperature=0), [1, 0])  # Tensors too
    with pytest.raises(ValueError, match=r"sample_next: logits must be \(batch, vocab_size\), got shape \(3,\)"):
        gen.sample_next(logits[0])
    nn.manual_seed(3)
    first = gen.sample_next(np.zeros((4, 50)))  # without an rng: the default generator, which manual_seed seeds
    nn.manual_seed(3)
    np.testing.assert_array_equal(gen.sample_next(np.zeros((4, 50))), first)


def test_sampling_matches_the_softmax_probabilities():
    np.testing.assert_allclose(frequencies(LOGITS), [0.5, 0.2, 0.15, 0.1, 0.05], atol=0.015)


def test_temperature_sharpens_or_flattens():
    probs = np.exp(LOGITS / 0.5) / np.exp(LOGITS / 0.5).sum()
    np.testing.assert_allclose(frequencies(LOGITS, temperature=0.5), probs[0], atol=0.015)
    hot = frequencies(LOGITS, temperature=100.0)
    np.testing.assert_allclose(hot, 0.2, atol=0.02)  # nearly uniform


def test_top_k_keeps_the_k_likeliest_renormalised():
    freq = frequencies(LOGITS, top_k=2)
    np.testing.assert_allclose(freq, [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], atol=0.015)
    assert (freq[2:] == 0).all()
    filtered = gen.filter_logits(LOGITS, top_k=10)  # more than the vocabulary: keeps everything
    np.testing.assert_allclose(filtered, LOGITS)


def test_top_p_keeps_the_smallest_nucleus_reaching_p():
    # 0.5 < 0.6, 0.5 + 0.2 >= 0.6: the nucleus is the first two tokens.
    kept = np.isfinite(gen.filter_logits(LOGITS, top_p=0.6))
    np.testing.assert_array_equal(kept, [[True, True, False, False, False]])
    kept = np.isfinite(gen.filter_logits(LOGITS, top_p=0.71))  # 0.7 < 0.71: a third token is needed
    np.testing.assert_array_equal(kept, [[True, True, True, False, False]])
    kept = np.isfinite(gen.filter_logits(LOGITS, top_p=0.01))  # the likeliest token always stays
    np.testing.assert_array_equal(kept, [[True, False, False, False, False]])
    shuffled = LOGITS[:, [3, 0, 4, 2, 1]]  # the order of the vocabulary does not matter
    np.testing.assert_array_equal(np.isfinite(gen.filter_logits(shuffled, top_p=0.6)),
                                  [[False, True, False, False, True]])
    np.testing.assert_allclose(frequencies(LOGITS, top_p=0.6), [0.5 / 0.7, 0.2 / 0.7, 0, 0, 0], atol=0.015)
    both = np.isfinite(gen.filter_logits(LOGITS, top_k=3, top_p=0.99))
    np.testing.assert_array_equal(both, [[True, True, True, False, False]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-20, 20), min_size=1, max_size=12), st.floats(0.01, 1.0))
def test_the_nucleus_is_the_smallest_set_of_likeliest_tokens_reaching_p(values, p):
    logits = np.array([values])
    kept = np.isfinite(gen.filter_logits(logits, top_p=p))[0]
    probs = np.exp(logits[0] - logits.max()) / np.exp(logits[0] - logits.max()).sum()
    assert kept[probs == probs.max()].any()
    assert probs[kept].min() >= probs[~kept].max(initial=0)  # nothing left out is likelier than what is in
    assert probs[kept].sum() >= p - 1e-9 or kept.all()  # the kept mass reaches p...
    smallest = np.flatnonzero(kept)[np.argmin(probs[kept])]
    assert probs[kept].sum() - probs[smallest] < p + 1e-9  # ...and would not without its least likely token


def test_filter_leaves_the_input_alone_and_rows_independent():
    logits = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    filtered = gen.filter_logits(logits, top_k=1)
    np.testing.assert_array_equal(np.isfinite(filtered), [[False, False, True], [True, False, False]])
    assert np.isfinite(logits).all()


@pytest.mark.parametrize("options, message", [
    (dict(temperature=-0.5), "temperature must be a finite number >= 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number"),
    (dict(top_k=0), "top_k must be a positive integer or None, got 0"),
    (dict(top_k=2.5), "top_k must be a positive integer or None, got 2.5"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\] or None, got 0.0"),
    (dict(top_p=1.5), r"top_p must be in \(0, 1\] or None, got 1.5"),
])
def test_bad_sampling_options_are_named(options, message):
    with pytest.raises(ValueError, match=message):
        gen.check_sampling(**{"temperature": 1.0, "top_k": None, "top_p": None, **options}, who="GPT.generate")


def test_the_loop_appends_tokens_and_stops_rows_at_the_stop_id():
    seen = []

    def next_logits(tokens):  # a "model" that predicts last token + 1, and reports what it was given
        seen.append(tokens.copy())
        return np.eye(6)[(tokens[:, -1] + 1) % 6] * 10

    out, logits = gen.autoregressive(next_logits, np.array([[0], [3]]), 4, temperature=0.0, return_logits=True)
    np.testing.assert_array_equal(out, [[0, 1, 2, 3, 4], [3, 4, 5, 0, 1]])
    assert [s.shape[1] for s in seen] == [1, 2, 3, 4] and logits.shape == (2, 4, 6)
    # With stop_id=5: the second row stops at 5 and repeats it; the loop ends once every row has stopped.
    out = gen.autoregressive(next_logits, np.array([[2], [3]]), 10, temperature=0.0, stop_id=5)
    np.testing.assert_array_equal(out, [[2, 3, 4, 5], [3, 4, 5, 5]])
    assert gen.autoregressive(next_logits, np.array([[1]]), 0).shape == (1, 1)
    with pytest.raises(ValueError, match="max_new_tokens must be an integer >= 0, got 2.0"):
        gen.autoregressive(next_logits, np.array([[1]]), 2.0)


def test_the_loop_runs_without_recording_a_graph_and_samples_reproducibly():
    weight = mg.Tensor(np.zeros((1, 6)), requires_grad=True)
    recorded = []

    def next_logits(tokens):
        logits = weight * 1.0 + np.zeros((len(tokens), 6))
        recorded.append(logits.requires_grad)
        return logits

    a = gen.autoregressive(next_logits, np.zeros((3, 1), dtype=int), 8, rng=np.random.default_rng(5))
    b = gen.autoregressive(next_logits, np.zeros((3, 1), dtype=int), 8, rng=5)  # a seed works too
    np.testing.assert_array_equal(a, b)
    assert not any(recorded)
    assert len(np.unique(a[:, 1:])) > 1  # uniform logits: the draws vary


@pytest.mark.parametrize("temperature", [np.float32(1e-38), 1e-300, 5e-324])
def test_a_tiny_temperature_samples_the_argmax_not_token_0(temperature):
    """The limit of temperature -> 0 is greedy decoding; dividing first would overflow into NaN and pick id 0."""
    logits = np.array([[1.0, 3.0, 2.0], [0.5, -1.0, 4.0]], dtype=np.float32)
    for seed in range(5):
        np.testing.assert_array_equal(gen.sample_next(logits, temperature, rng=seed), [1, 2])
    tied = np.array([[0.0, 7.0, 7.0]], dtype=np.float32)  # the limit splits evenly between tied maxima
    picks = [gen.sample_next(tied, temperature, rng=seed)[0] for seed in range(200)]
    assert set(picks) == {1, 2} and 60 < picks.count(1) < 140


@pytest.mark.parametrize("row, message", [([np.nan, 1.0, 2.0], "hold NaN"), ([1.0, np.inf, 2.0], r"hold \+inf"),
                                          ([-np.inf, -np.inf, -np.inf], "are all -inf")])
@pytest.mark.parametrize("temperature", [0, 0.8])
def test_logits_without_a_distribution_are_an_error_not_token_0(row, message, temperature):
    logits = np.array([[0.0, 1.0, 2.0], row])
    with pytest.raises(ValueError, match=f"sample_next: the logits of row 1 {message}"):
        gen.sample_next(logits, temperature, rng=0)

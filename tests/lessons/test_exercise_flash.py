"""Exercise 13 (demos/exercises/ex13_flash_attention.py): named wrong solutions of the merge of online-softmax
states and of one tile's backward, each failing with a message that names the mistake. (That the reference
passes and the stubs are "not started" is checked for every exercise in test_exercises.py.)"""

import types

import numpy as np
import pytest

import minigrad as mg
from demos.exercises import check
from demos.exercises.course import load
from demos.exercises.grader import Wrong
from minigrad.ops import OPS


def with_(**replacements):
    namespace = types.SimpleNamespace(**vars(load(13, solutions=True)))
    for name, value in replacements.items():
        setattr(namespace, name, value)
    return namespace


def merge_without_rescaling(a, b):
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    return np.maximum(m1, m2), l1 + l2, acc1 + acc2


def merge_inverted(a, b):
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    m = np.maximum(m1, m2)
    with np.errstate(all="ignore"):
        f1, f2 = (np.where(np.isneginf(mi), 0.0, np.exp(m - mi)) for mi in (m1, m2))
    return m, f1 * l1 + f2 * l2, f1 * acc1 + f2 * acc2


def merge_unguarded(a, b):
    (m1, l1, acc1), (m2, l2, acc2) = a, b
    m = np.maximum(m1, m2)
    f1, f2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, f1 * l1 + f2 * l2, f1 * acc1 + f2 * acc2


def merge_returning_nothing(a, b):
    merge_unguarded(a, b)


def tile_without_delta(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    p = (q_i @ k_j.swapaxes(-1, -2) * scale - lse_i).exp()
    ds = p * (do_i @ v_j.swapaxes(-1, -2))
    return ds @ k_j * scale, ds.swapaxes(-1, -2) @ q_i * scale, p.swapaxes(-1, -2) @ do_i


def tile_without_scale(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    p = (q_i @ k_j.swapaxes(-1, -2) * scale - lse_i).exp()
    ds = p * (do_i @ v_j.swapaxes(-1, -2) - delta_i)
    return ds @ k_j, ds.swapaxes(-1, -2) @ q_i, p.swapaxes(-1, -2) @ do_i


def tile_renormalised(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    p = (q_i @ k_j.swapaxes(-1, -2) * scale).softmax(axis=-1)
    ds = p * (do_i @ v_j.swapaxes(-1, -2) - delta_i)
    return ds @ k_j * scale, ds.swapaxes(-1, -2) @ q_i * scale, p.swapaxes(-1, -2) @ do_i


def tile_through_numpy(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):  # right values; second order is lost
    p = mg.tensor(np.exp(q_i.data @ k_j.data.swapaxes(-1, -2) * scale - lse_i.data))
    ds = p * (do_i @ v_j.swapaxes(-1, -2) - delta_i)
    return ds @ k_j * scale, ds.swapaxes(-1, -2) @ q_i * scale, p.swapaxes(-1, -2) @ do_i


def tile_with_p_untransposed(q_i, k_j, v_j, do_i, lse_i, delta_i, scale):
    p = (q_i @ k_j.swapaxes(-1, -2) * scale - lse_i).exp()
    ds = p * (do_i @ v_j.swapaxes(-1, -2) - delta_i)
    return ds @ k_j * scale, ds.swapaxes(-1, -2) @ q_i * scale, p @ do_i


WRONG = [
    (dict(merge=merge_without_rescaling), ["merge of 2 blocks", "rescale each by exp(m_own - m)"]),
    (dict(merge=merge_inverted), ["merge of 2 blocks", "the rescaling is inverted"]),
    (dict(merge=merge_unguarded), ["merge of 2 blocks", "NaN", "neither part had seen", "safe max"]),
    (dict(merge=merge_returning_nothing), ["merge of 2 blocks", "returned None", "`return` missing"]),
    (dict(tile_backward=tile_without_delta), ["tile_backward, queries 1-3", "rowsum(dO * O)"]),
    (dict(tile_backward=tile_without_scale), ["tile_backward, queries 1-3", "the scale is missing"]),
    (dict(tile_backward=tile_renormalised), ["tile_backward, queries 1-3", "renormalised on its own"]),
    (dict(tile_backward=tile_through_numpy), ["my_flash_attention", "second-order", "steps outside the graph"]),
    (dict(tile_backward=tile_with_p_untransposed),
     ["tile_backward, queries 1-3", "raised OpError", "inner sizes differ"]),
]


@pytest.mark.parametrize("replacements, named", WRONG, ids=[f.__name__ for r, _ in WRONG for f in r.values()])
def test_a_wrong_answer_to_exercise_13_fails_naming_the_mistake(replacements, named):
    with pytest.raises(Wrong) as caught:
        check(13, module=with_(**replacements), say=lambda line: None)
    message = str(caught.value)
    for words in named:
        assert words in message, f"{words!r} not in: {message}"
    assert "Read: the lesson demos/flash_attention_lesson.py" in message
    assert "my_flash_attention" not in OPS, "a failed check takes the learner's op out of the table"

"""What backward leaves behind when it frees a graph (autograd/freed.py): records that draw, and nothing unpicklable."""

import copy
import io
import pickle

import numpy as np

import minigrad as mg
from minigrad import nn, viz
from models import GPT, GPTConfig


def _trained_once(model, x):
    loss = model(x).sum()
    loss.backward()
    return loss


def test_a_model_pickles_after_backward_and_loads_with_its_weights_and_grads():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    loss = _trained_once(model, mg.tensor(np.ones((2, 3), dtype=np.float32)))
    copy_ = pickle.loads(pickle.dumps(model))
    for (name, p), (_, q) in zip(model.named_parameters(), copy_.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
        np.testing.assert_array_equal(p.grad.data, q.grad.data, err_msg=name)
    # The loaded model trains on; the original's graph can still be drawn from its records.
    _trained_once(copy_, mg.tensor(np.ones((2, 3), dtype=np.float32)))
    out = io.StringIO()
    viz.print_graph(loss, file=out)
    assert "tanh" in out.getvalue()


def test_a_gpt_pickles_after_backward():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8), seed=0)
    idx = np.arange(8).reshape(1, 8) % 11
    _, loss = model(idx, idx)
    loss.backward()
    loaded = pickle.loads(pickle.dumps(model))
    assert all(np.array_equal(p.grad.data, q.grad.data)
               for p, q in zip(model.parameters(), loaded.parameters()))


def test_a_deepcopy_after_backward_still_gets_records_of_its_own():
    w = mg.tensor(np.ones(3, dtype=np.float32), requires_grad=True, name="w")
    (w * 2.0).sum().backward()
    w2 = copy.deepcopy(w)
    (w2 * 3.0).sum().backward()
    assert w2._record.tensor() is w2 and w._record.tensor() is w

"""RNN, LSTM and GRU: the cell equations with PyTorch's gate layout, unrolling, gradients, errors."""

import numpy as np
import pytest
from nn_helpers import randn

import minigrad as mg
from minigrad import nn


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def parts(cell, x, h, n_gates):
    """x W_ih^T + b_ih and h W_hh^T + b_hh, split into the gate blocks."""
    xi = x @ cell.weight_ih.data.T + cell.bias_ih.data
    hh = h @ cell.weight_hh.data.T + cell.bias_hh.data
    return np.split(xi, n_gates, axis=-1), np.split(hh, n_gates, axis=-1)


def test_rnn_cell_equation():
    cell = nn.RNNCell(3, 4).double()
    x, h = randn(2, 3), randn(2, 4, seed=1)
    (xi,), (hh,) = parts(cell, x.data, h.data, 1)
    np.testing.assert_allclose(cell(x, h).data, np.tanh(xi + hh), rtol=1e-12)
    np.testing.assert_allclose(cell(x).data, np.tanh(xi + cell.bias_hh.data), rtol=1e-12)  # h = 0 by default
    relu = nn.RNNCell(3, 4, nonlinearity="relu").double()
    (xi,), (hh,) = parts(relu, x.data, h.data, 1)
    np.testing.assert_allclose(relu(x, h).data, np.maximum(xi + hh, 0), rtol=1e-12)
    bound = 1 / np.sqrt(4)
    assert all(np.abs(p.data).max() <= bound for p in nn.RNNCell(3, 4).parameters())


def test_lstm_cell_equations_with_gates_i_f_g_o():
    cell = nn.LSTMCell(3, 4).double()
    assert cell.weight_ih.shape == (16, 3) and cell.weight_hh.shape == (16, 4)
    x, h, c = randn(2, 3), randn(2, 4, seed=1), randn(2, 4, seed=2)
    (xi, xf, xg, xo), (hi, hf, hg, ho) = parts(cell, x.data, h.data, 4)
    i, f, g, o = sigmoid(xi + hi), sigmoid(xf + hf), np.tanh(xg + hg), sigmoid(xo + ho)
    c_next = f * c.data + i * g
    h_new, c_new = cell(x, (h, c))
    np.testing.assert_allclose(c_new.data, c_next, rtol=1e-12)
    np.testing.assert_allclose(h_new.data, o * np.tanh(c_next), rtol=1e-12)


def test_gru_cell_equations_with_gates_r_z_n():
    cell = nn.GRUCell(3, 4).double()
    assert cell.weight_ih.shape == (12, 3)
    x, h = randn(2, 3), randn(2, 4, seed=1)
    (xr, xz, xn), (hr, hz, hn) = parts(cell, x.data, h.data, 3)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    np.testing.assert_allclose(cell(x, h).data, (1 - z) * n + z * h.data, rtol=1e-12)


@pytest.mark.parametrize("cell", [nn.RNNCell(3, 2), nn.RNNCell(3, 2, bias=False), nn.RNNCell(3, 2, nonlinearity="relu"),
                                  nn.GRUCell(3, 2)], ids=["rnn", "rnn-no-bias", "rnn-relu", "gru"])
def test_cell_gradients(cell):
    assert nn.gradcheck_module(cell, randn(2, 3), randn(2, 2, seed=1))


def test_lstm_cell_gradients():
    assert nn.gradcheck_module(nn.LSTMCell(3, 2), randn(2, 3), randn(2, 2, seed=1), randn(2, 2, seed=2),
                            forward=lambda m, x, h, c: m(x, (h, c)))


@pytest.mark.parametrize("layer_class", [nn.RNN, nn.GRU, nn.LSTM])
def test_layer_unrolls_its_cells_over_time(layer_class):
    layer = layer_class(3, 4, num_layers=2, batch_first=True).double()
    x = randn(2, 5, 3)
    outputs, final = layer(x)
    assert outputs.shape == (2, 5, 4)
    inputs, finals = x, []
    for cell in layer.cells:  # the same thing by hand: each layer runs over the previous layer's outputs
        state, steps = None, []
        for t in range(5):
            state = cell(inputs[:, t], state)
            steps.append((state[0] if isinstance(state, tuple) else state).data)
        inputs = mg.Tensor(np.stack(steps, axis=1))
        finals.append(state)
    np.testing.assert_allclose(outputs.data, inputs.data, rtol=1e-12)
    if layer_class is nn.LSTM:
        h_n, c_n = final
        np.testing.assert_allclose(h_n.data, np.stack([h.data for h, _ in finals]), rtol=1e-12)
        np.testing.assert_allclose(c_n.data, np.stack([c.data for _, c in finals]), rtol=1e-12)
    else:
        assert final.shape == (2, 2, 4)
        np.testing.assert_allclose(final.data, np.stack([h.data for h in finals]), rtol=1e-12)
        np.testing.assert_allclose(final.data[-1], outputs.data[:, -1], rtol=1e-12)


def test_initial_state_and_batch_first_false():
    rnn = nn.GRU(3, 4, batch_first=False).double()
    x, h0 = randn(5, 2, 3), randn(1, 2, 4, seed=1)  # (T, B, input_size)
    outputs, h_n = rnn(x, h0)
    assert outputs.shape == (5, 2, 4)
    by_hand = rnn.cells[0](x[0], h0[0])
    np.testing.assert_allclose(outputs.data[0], by_hand.data, rtol=1e-12)
    lstm = nn.LSTM(3, 4, batch_first=True).double()
    state = (randn(1, 2, 4, seed=1), randn(1, 2, 4, seed=2))
    out, (h, c) = lstm(randn(2, 1, 3), state)
    step_h, step_c = lstm.cells[0](randn(2, 1, 3)[:, 0], (state[0][0], state[1][0]))
    np.testing.assert_allclose(h.data[0], step_h.data, rtol=1e-12)
    np.testing.assert_allclose(c.data[0], step_c.data, rtol=1e-12)


@pytest.mark.parametrize("layer", [nn.RNN(2, 3), nn.GRU(2, 2, num_layers=2), nn.LSTM(2, 2)], ids=["rnn", "gru", "lstm"])
def test_layer_gradients_through_time(layer):
    def run(m, x):
        outputs, final = m(x)
        return (outputs, *final) if isinstance(final, tuple) else (outputs, final)

    assert nn.gradcheck_module(layer, randn(2, 3, 2), forward=run)


def test_dropout_between_layers_only_while_training():
    lstm = nn.LSTM(3, 4, num_layers=2, dropout=0.5, rng=np.random.default_rng(0)).double()
    x = randn(2, 5, 3)
    lstm.eval()
    evaluated = lstm(x)[0].data
    np.testing.assert_array_equal(lstm(x)[0].data, evaluated)
    lstm.train()
    assert not np.allclose(lstm(x)[0].data, evaluated)


def test_errors_name_the_layer_and_shapes():
    cell = nn.LSTMCell(3, 4).double()
    with pytest.raises(ValueError, match=r"LSTMCell\(3, 4, bias=True\).*\(2, 5\).*3 features"):
        cell(randn(2, 5))
    with pytest.raises(ValueError, match=r"LSTMCell.*\(B, hidden_size\) = \(2, 4\), got \(2, 3\)"):
        cell(randn(2, 3), (randn(2, 3), randn(2, 4)))
    with pytest.raises(ValueError, match=r"RNN\(3, 4, batch_first=False\): the input must be \(T, B, input_size\)"):
        nn.RNN(3, 4)(randn(2, 3))
    with pytest.raises(ValueError, match=r"RNN\(3, 4, batch_first=True\): the input must be \(B, T, input_size\)"):
        nn.RNN(3, 4, batch_first=True)(randn(2, 3))
    with pytest.raises(ValueError, match=r"GRU.*\(num_layers, B, hidden_size\) = \(1, 2, 4\), got \(2, 4\)"):
        nn.GRU(3, 4, batch_first=True).double()(randn(2, 5, 3), randn(2, 4))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNNCell(3, 4, nonlinearity="sigmoid")


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_matches_pytorch_layers(name):
    torch = pytest.importorskip("torch")
    ours = getattr(nn, name)(3, 4, num_layers=2).double()
    ref = getattr(torch.nn, name)(3, 4, num_layers=2, dtype=torch.float64)  # both: (T, B, input_size)
    assert list(ours.state_dict()) == list(ref.state_dict())  # weight_ih_l0, weight_hh_l0, bias_ih_l0...
    ours.load_state_dict({k: v.numpy() for k, v in ref.state_dict().items()})
    x = randn(5, 2, 3)
    out, final = ours(x)
    ref_out, ref_final = ref(torch.from_numpy(x.data))
    np.testing.assert_allclose(out.data, ref_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    finals = final if isinstance(final, tuple) else (final,)
    ref_finals = ref_final if isinstance(ref_final, tuple) else (ref_final,)
    for a, b in zip(finals, ref_finals):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("composite", [False, True])
@pytest.mark.parametrize("cls", [nn.RNN, nn.GRU, nn.LSTM])
def test_a_float64_initial_state_is_refused_by_a_float32_recurrent_layer(cls, composite):
    layer = cls(3, 4, batch_first=True)
    x = mg.zeros(2, 5, 3)
    h = mg.tensor(np.zeros((1, 2, 4)))  # float64
    state_arg = (h, h.astype(np.float32)) if cls is nn.LSTM else h
    with mg.composite_mode(composite), pytest.raises(TypeError, match=r"the initial state is float64 but the "
                                                                      r"layer's parameters are float32"):
        layer(x, state_arg)
    if cls is nn.LSTM:  # the cell state is checked too
        with pytest.raises(TypeError, match="initial state is float64"):
            layer(x, (h.astype(np.float32), h))
    ok = h.astype(np.float32)
    out, _ = layer(x, (ok, ok) if cls is nn.LSTM else ok)
    assert out.dtype == np.float32


@pytest.mark.parametrize("cls", [nn.RNNCell, nn.GRUCell, nn.LSTMCell])
def test_a_float64_state_is_refused_by_a_float32_cell(cls):
    cell = cls(3, 4)
    x, h = mg.zeros(2, 3), mg.tensor(np.zeros((2, 4)))
    with pytest.raises(TypeError, match=r"the state is float64 but the layer's parameters are float32"):
        cell(x, (h, h) if cls is nn.LSTMCell else h)


def test_a_weight_assigned_to_the_layer_is_the_one_it_uses():
    rnn = nn.RNN(3, 4).double()
    rnn.weight_hh_l0 = nn.Parameter(np.zeros((4, 4)))  # no recurrence: each step is tanh(x W_ih^T + b_ih + b_hh)
    x = randn(5, 2, 3)
    out, _ = rnn(x)
    expected = np.tanh(x.data @ rnn.weight_ih_l0.data.T + rnn.bias_ih_l0.data + rnn.bias_hh_l0.data)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)
    assert [name for name, _ in rnn.named_parameters()] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0",
                                                            "bias_hh_l0"]

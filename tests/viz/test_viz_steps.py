"""viz.backward_steps: the engine's visiting order, the gradients shown at each step, the shares adding up
where a tensor is used twice, the text and HTML forms, and the HTML stepping in a real headless browser."""

import html
import re
import shutil
import subprocess

import numpy as np
import pytest

import minigrad as mg
from minigrad import viz


def small_graph():
    x = mg.tensor(np.array([0.5, -1.0]), requires_grad=True, name="x")
    w = mg.tensor(np.array([2.0, 3.0]), requires_grad=True, name="w")
    h = x * w
    h.name = "h"
    y = (h * h + h.tanh()).sum()  # h is read three times: twice by h * h, once by tanh
    y.name = "loss"
    return x, w, h, y


def test_the_frames_follow_the_engines_order_and_each_node_is_visited_after_all_its_consumers():
    x, w, h, y = small_graph()
    steps = viz.backward_steps(y)
    order = steps.order
    assert order[0].name == "loss" and {n.name for n in order[-2:]} == {"x", "w"}
    position = {n.index: k for k, n in enumerate(order)}
    for n in order:
        for c in n.consumers:
            if c.index in position:
                assert position[c.index] < position[n.index], "a tensor is visited after every tensor made from it"
    assert len(steps) == len(order) + 1 and steps.frames[0].node is None
    assert x.grad is None and w.grad is None, ".grad is left alone"


def test_each_frame_shows_the_complete_gradient_and_the_shares_add_up_where_a_tensor_is_used_twice():
    x, w, h, y = small_graph()
    steps = viz.backward_steps(y)
    gx, gw, gh = mg.grad(y, [x, w, h], retain_graph=True)
    by_name = {f.node.name: f for f in steps.frames[1:] if f.node.name}
    np.testing.assert_allclose(by_name["x"].grad, gx.data)
    np.testing.assert_allclose(by_name["w"].grad, gw.data)
    np.testing.assert_allclose(by_name["h"].grad, gh.data)
    shares_to_h = [s for f in steps.frames for s in f.shares if s.to.name == "h"]
    assert [s.count for s in shares_to_h] == [1, 2, 3] and {s.expected for s in shares_to_h} == {3}
    np.testing.assert_allclose(sum(s.share for s in shares_to_h), gh.data)  # the shares sum to what the engine gave
    np.testing.assert_allclose(shares_to_h[-1].total, gh.data)
    tanh_share = next(s for s in shares_to_h if s.count == 1)
    np.testing.assert_allclose(tanh_share.share, 1 - np.tanh(h.data) ** 2)  # tanh is visited first (the engine's order)
    frame = steps.frames[steps.order.index(by_name["h"].node) + 1]
    assert frame.totals[by_name["h"].node.index] is not None and by_name["h"].node.index in frame.done


def test_the_shares_sum_to_the_engines_gradient_on_a_broadcast_and_a_matmul():
    rng = np.random.default_rng(0)
    a = mg.tensor(rng.standard_normal((3, 4)), requires_grad=True, name="a")
    b = mg.tensor(rng.standard_normal(4), requires_grad=True, name="b")
    W = mg.tensor(rng.standard_normal((4, 2)), requires_grad=True, name="W")
    z = ((a + b) @ W).tanh()
    loss = (z * (a @ W)).sum()  # a and W each read twice
    steps = viz.backward_steps(loss)
    expected = dict(zip("abW", mg.grad(loss, [a, b, W], retain_graph=True)))
    for name in "abW":
        received = [s.share for f in steps.frames for s in f.shares if s.to.name == name]
        np.testing.assert_allclose(sum(received), expected[name].data, rtol=1e-12)
        assert received[0].shape == (expected[name].shape)


def test_text_and_dot_name_the_visited_tensor_and_the_values():
    x, w, h, y = small_graph()
    steps = viz.backward_steps(y)
    text = steps.text()
    assert text.startswith("before backward")
    assert re.search(r"-> h = mul\(\.\.\.\) receives .* \(share 3 of 3; total so far \[2\.42, -5\.99\] \(2,\)\)", text)
    assert "gradient of x: [4.84, -17.97] (2,)" in text and "a leaf: this is its final gradient" in text
    dot = steps.to_dot(len(steps) - 1)
    assert dot.count('fillcolor="#ffd8a8"') == 1  # one tensor is the current one
    assert "grad [4.84, -17.97]" in dot


def test_a_freed_graph_or_a_root_without_grad_is_a_clear_error():
    x, w, h, y = small_graph()
    y.backward()
    with pytest.raises(ValueError, match="freed by backward"):
        viz.backward_steps(y)
    with pytest.raises(ValueError, match="does not require grad"):
        viz.backward_steps(mg.tensor([1.0]).sum())


def test_save_html_writes_a_self_contained_page(tmp_path):
    x, w, h, y = small_graph()
    path = viz.backward_steps(y).save_html(tmp_path / "sub" / "steps.html")
    page = open(path, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and "<script>" in page and "src=" not in page
    assert ("<svg" in page) == (shutil.which("dot") is not None)  # inline SVG with dot, the DOT source without
    assert 'class="next"' in page and 'type="range"' in page
    assert not list(tmp_path.glob("sub/.*.tmp"))
    assert "<script>" in viz.backward_steps(small_graph()[3])._repr_html_()


def test_without_graphviz_the_page_shows_the_dot_source_and_says_what_to_install(tmp_path, monkeypatch):
    from minigrad.viz import steps as steps_module

    monkeypatch.setattr(steps_module.shutil, "which", lambda name: None)
    page = open(viz.backward_steps(small_graph()[3]).save_html(tmp_path / "steps.html"), encoding="utf-8").read()
    assert '<p class="note"' in page and "<svg" not in page and "digraph" in page  # each frame as DOT source
    said = html.unescape(page)
    assert "Graphviz's `dot` program was not found" in said
    assert "install Graphviz (apt-get install graphviz, or brew install graphviz)" in said


def test_with_graphviz_the_page_draws_and_has_no_install_note(monkeypatch):

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    html_page = viz.backward_steps(small_graph()[3]).to_html()
    assert "<svg" in html_page and 'class="note"' not in html_page


CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="no headless chromium (apt-get install chromium)")
def test_the_html_page_steps_in_a_real_headless_browser(tmp_path):
    x, w, h, y = small_graph()
    steps = viz.backward_steps(y)
    path = steps.save_html(tmp_path / "steps.html")
    for k in (0, 3, len(steps) - 1, len(steps) + 5):  # #step=k clicks "next" k times on load (past the end: stays)
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                              f"file://{path}#step={k}"], capture_output=True, text=True, timeout=120).stdout
        shown = min(k, len(steps) - 1)
        assert f'data-frame="{shown}"' in dom, dom[:500]
        assert f"frame {shown} of {len(steps) - 1}" in dom
        first_line = steps.frame_text(shown).splitlines()[0]
        pre = re.search(r'<pre class="text"[^>]*>(.*?)</pre>', dom, re.S).group(1)
        assert pre.splitlines()[0] == first_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        if shutil.which("dot"):
            assert re.search(r'<div class="picture"[^>]*><svg', dom), "the frame's picture is drawn inline"

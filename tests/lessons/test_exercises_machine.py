"""Exercises 10-12 (checkpoint, ring all-reduce, loss scaler): each deliberately wrong answer is caught, and the
message names the fault. (That each check passes on its reference and says "not started" on its stub is tested
with the others, in test_exercises.py.)"""

import numpy as np
import pytest
from test_exercises import assert_caught, block, solutions

import minigrad as mg


class _Counting:
    def step(self):
        pass


def _wrong_cases():
    s10 = solutions(10)

    def vjp_without_recording(g, out, *inputs, fn):  # runs fn under backward's no_grad: nothing to differentiate
        again = fn(*[x.detach() for x in inputs])
        return mg.grad(again, list(inputs), g)

    def vjp_always_detached(g, out, *inputs, fn):  # right first order, but the gradient is not a function of x
        starts = [x.detach().requires_grad_() for x in inputs]
        with mg.enable_grad():
            again = fn(*starts)
        return mg.grad(again, starts, g)

    def vjp_for_the_first_input_only(g, out, *inputs, fn):
        start = inputs[0].detach().requires_grad_()
        with mg.enable_grad():
            again = fn(start, *inputs[1:])
        return (mg.grad(again, [start], g)[0], *[mg.zeros_like(x) for x in inputs[1:]])

    def forward_that_keeps_the_graph(*arrays, fn):  # the output's graph saved: nothing is freed
        out = fn(*[mg.tensor(a, requires_grad=True) for a in arrays])
        return out.data, out

    def whole_vectors_around_the_ring(buffers, send):  # right sums, (N - 1) x size per worker
        n = len(buffers)
        passing = [b.copy() for b in buffers]
        for _ in range(n - 1):
            passing = [send(i, (i + 1) % n, passing[i]) for i in range(n)]
            passing = passing[-1:] + passing[:-1]  # worker i now holds what i - 1 sent
            for i in range(n):
                buffers[i] += passing[i]

    def reduce_scatter_only(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b, n) for b in buffers]
        for step in range(n - 1):
            received = [send(i, (i + 1) % n, chunks[i][(i - step) % n]) for i in range(n)]
            for i in range(n):
                chunks[(i + 1) % n][(i - step) % n] += received[i]

    def backwards_ring(buffers, send):  # right sums, right traffic, but around the ring the other way
        n = len(buffers)
        chunks = [np.array_split(b, n) for b in buffers]
        for step in range(n - 1):
            received = [send(i, (i - 1) % n, chunks[i][(i + step) % n]) for i in range(n)]
            for i in range(n):
                chunks[(i - 1) % n][(i + step) % n] += received[i]
        for step in range(n - 1):
            received = [send(i, (i - 1) % n, chunks[i][(i - 1 - step) % n]) for i in range(n)]
            for i in range(n):
                chunks[(i - 1) % n][(i - 1 - step) % n][...] = received[i]

    s12 = solutions(12)

    class StepsOnInf(s12.LossScaler):  # unscales and rescales right, but never skips
        def step(self, optimizer, params):
            super().step(_Counting(), params)
            optimizer.step()
            return True

    class IgnoresNaN(s12.LossScaler):  # np.isinf instead of np.isfinite: a NaN gradient goes through
        def unscale_(self, params):
            super().unscale_(params)
            self.found_inf = any(bool(np.isinf(p.grad.data).any()) for p in params)

    class DividesTwice(s12.LossScaler):  # step() unscales whether or not unscale_ already did
        def step(self, optimizer, params):
            self.found_inf = None
            return super().step(optimizer, params)

    class UnscalesAgain(s12.LossScaler):  # a second unscale_ in one step is taken: divided twice
        def unscale_(self, params):
            self.found_inf = None
            super().unscale_(params)

    class RemembersTooLong(s12.LossScaler):  # never forgets this step's verdict: the next step is not unscaled
        def step(self, optimizer, params):
            kept = self.found_inf
            taken = super().step(optimizer, params)
            self.found_inf = not taken if kept is None else kept
            return taken

    class KeepsCounting(s12.LossScaler):  # backs off on inf but does not restart the count of good steps
        def step(self, optimizer, params):
            good = self.good_steps
            taken = super().step(optimizer, params)
            if not taken:
                self.good_steps = good
            return taken

    return [
        (12, dict(LossScaler=StepsOnInf), ["called optimizer.step() 1 time(s)", "is skipped"]),
        (12, dict(LossScaler=IgnoresNaN), ["NaN gradients", "called optimizer.step() 1 time(s)"]),
        (12, dict(LossScaler=KeepsCounting), ["the scale after step()", "start counting again"]),
        (12, dict(LossScaler=DividesTwice), ["unscale_ then clip", "step() must not divide again"]),
        (12, dict(LossScaler=UnscalesAgain), ["a second unscale_() before step() was taken", "raise RuntimeError"]),
        (12, dict(LossScaler=RemembersTooLong), ["step 1 (", "unscale_(): raised RuntimeError"]),
        (11, dict(ring_all_reduce=whole_vectors_around_the_ring), ["ring_all_reduce with 3 worker(s)", "bytes",
                                                                   "Send chunks, not whole vectors"]),
        (11, dict(ring_all_reduce=reduce_scatter_only), ["worker 0's buffer after the all-reduce", "expected"]),
        (11, dict(ring_all_reduce=backwards_ring),
         ["3 worker(s)", "worker 0 sent to worker 2", "only to the next worker"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, vjp=vjp_without_recording)),
         ["backward through my_checkpoint", "does not require grad"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, vjp=vjp_always_detached)),
         ["my_checkpoint, second order", "create_graph"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, vjp=vjp_for_the_first_input_only)),
         ["my_checkpoint's gradient for input 1"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, forward=forward_that_keeps_the_graph)),
         ["my_checkpoint, memory kept after the forward pass", "mg.no_grad()"]),
    ]


@pytest.mark.parametrize("n, replacements, named", _wrong_cases(),
                         ids=lambda v: "-".join(f"{k}.{getattr(x, '__name__', '')}" for k, x in v.items())
                         if isinstance(v, dict) else None)
def test_a_wrong_machine_exercise_fails_and_the_message_names_the_fault(n, replacements, named):
    assert_caught(n, replacements, named)

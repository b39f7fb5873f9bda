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
            self.found_inf = any(bool(np.isinf(p.grad.data).any()) for p in params if p.grad is not None)

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

    class FloatScale(s12.LossScaler):  # the scaled loss as a Python number: no graph behind it
        def scale_loss(self, loss):
            return loss.item() * self.scale

    class CrashesOnNoGradient(s12.LossScaler):  # unscale_ reads p.grad.data of a parameter with no gradient
        def unscale_(self, params):
            for p in params:
                p.grad.data *= np.float32(1 / self.scale)
            self.found_inf = not all(np.isfinite(p.grad.data).all() for p in params)

    def unscale_every_micro_batch(micro_losses, scaler, optimizer, scheduler, params, max_norm):
        for micro_loss in micro_losses:
            scaler.scale_loss(micro_loss() / len(micro_losses)).backward()
            scaler.unscale_(params)
            scaler.found_inf = None
        return s12.accumulated_step([], scaler, optimizer, scheduler, params, max_norm)

    def schedule_every_step(micro_losses, scaler, optimizer, scheduler, params, max_norm):
        taken = s12.accumulated_step(micro_losses, scaler, optimizer, scheduler, params, max_norm)
        if not taken:
            scheduler.step()
        return taken

    def step_every_micro_batch(micro_losses, scaler, optimizer, scheduler, params, max_norm):
        taken = True
        for micro_loss in micro_losses:
            taken = s12.accumulated_step([micro_loss], scaler, optimizer, scheduler, params, max_norm) and taken
        return taken

    def summed_not_mean(micro_losses, scaler, optimizer, scheduler, params, max_norm):
        return s12.accumulated_step([lambda f=f: f() * len(micro_losses) for f in micro_losses], scaler, optimizer,
                                    scheduler, params, max_norm)

    def vjp_detached_under_create_graph(g, out, *inputs, fn):  # a graph, but from copies: not a function of x
        starts = [x.detach().requires_grad_() for x in inputs]
        with mg.enable_grad():
            again = fn(*starts)
        return mg.grad(again, starts, g, create_graph=mg.is_grad_enabled())

    def vjp_asking_for_every_input(g, out, *inputs, fn):  # mg.grad of an input that does not require grad
        starts = inputs if mg.is_grad_enabled() else [x.detach().requires_grad_(x.requires_grad) for x in inputs]
        with mg.enable_grad():
            again = fn(*starts)
        return mg.grad(again, list(starts), g, create_graph=mg.is_grad_enabled())

    def no_replay(fn, *inputs, rng):
        return mg.OPS["my_checkpoint"](*inputs, fn=fn)

    def replay_without_putting_back(fn, *inputs, rng):
        saved = rng.bit_generator.state

        def replayed(*xs):
            rng.bit_generator.state = saved
            return fn(*xs)
        return mg.OPS["my_checkpoint"](*inputs, fn=replayed)

    def all_gather_off_by_one(buffers, send):  # the all-gather passes chunk (i - s), one before the finished one
        n = len(buffers)
        chunks = [np.array_split(b, n) for b in buffers]
        for step in range(n - 1):
            received = [send(i, (i + 1) % n, chunks[i][(i - step) % n]) for i in range(n)]
            for i in range(n):
                chunks[(i + 1) % n][(i - step) % n] += received[i]
        for step in range(n - 1):
            received = [send(i, (i + 1) % n, chunks[i][(i - step) % n]) for i in range(n)]
            for i in range(n):
                chunks[(i + 1) % n][(i - step) % n][...] = received[i]

    def six_workers_wrong(buffers, send):  # right for every N but 6: the check must try N = 6 too
        if len(buffers) == 6:
            buffers[0][...] = 0
            return
        s11.ring_all_reduce(buffers, send)

    s11 = solutions(11)
    return [
        (12, dict(LossScaler=FloatScale), ["scale_loss", "not a Tensor", "loss.item()", "loss * self.scale"]),
        (12, dict(LossScaler=CrashesOnNoGradient), ["grad is None", "skip it"]),
        (12, dict(accumulated_step=unscale_every_micro_batch), ["called unscale_ ", "once", "after the last"]),
        (12, dict(accumulated_step=schedule_every_step), ["scheduler.step() 1 time(s) on a skipped step"]),
        (12, dict(accumulated_step=step_every_micro_batch), ["accumulated_step, step 0", "unscale_"]),
        (12, dict(accumulated_step=summed_not_mean), ["the mean of the micro-batches' gradients", "weighed 1 /"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, vjp=vjp_detached_under_create_graph)),
         ["second order", "not functions of the inputs", "detached copies"]),
        (10, dict(my_checkpoint=block(s10.my_checkpoint, vjp=vjp_asking_for_every_input)),
         ["not requiring grad", "None for it"]),
        (10, dict(checkpoint_with_rng=no_replay), ["checkpoint_with_rng", "another dropout mask",
                                                   "rng.bit_generator.state"]),
        (10, dict(checkpoint_with_rng=replay_without_putting_back), ["the generator after backward", "put the "
                                                                                                     "generator back"]),
        (11, dict(ring_all_reduce=all_gather_off_by_one), ["chunk(s) 0", "(i + 1 - s) mod N", "off by one"]),
        (11, dict(ring_all_reduce=six_workers_wrong), ["6 worker(s)"]),
        (12, dict(LossScaler=StepsOnInf), ["called optimizer.step() 1 time(s)", "is skipped"]),
        (12, dict(LossScaler=IgnoresNaN), ["NaN gradients", "called optimizer.step() 1 time(s)"]),
        (12, dict(LossScaler=KeepsCounting), ["the scale after step()", "start counting again"]),
        (12, dict(LossScaler=DividesTwice), ["unscale_ then clip", "step() must not divide again"]),
        (12, dict(LossScaler=UnscalesAgain), ["a second unscale_() before step() was taken", "raise RuntimeError"]),
        (12, dict(LossScaler=RemembersTooLong), ["step 1 (", "unscale_(): raised RuntimeError"]),
        (11, dict(ring_all_reduce=whole_vectors_around_the_ring), ["ring_all_reduce with 3 worker(s)", "bytes",
                                                                   "Send chunks, not whole vectors"]),
        (11, dict(ring_all_reduce=reduce_scatter_only), ["worker 0's buffer after the all-reduce", "chunk(s) 0"]),
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

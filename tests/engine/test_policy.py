"""The thread policy (minigrad/kernels/policy.py): what it chooses, what overrides it, and that it is applied."""

import json
import os
import subprocess
import sys

import pytest

import minigrad as mg
from minigrad.kernels import policy

THREAD_VARIABLES = ("MINIGRAD_THREADS", *policy.USER_THREAD_VARIABLES)


@pytest.fixture
def clean_env(monkeypatch):
    for name in (*THREAD_VARIABLES, "MINIGRAD_AUTOTUNE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def fake_machine(clean_env):
    """Set the CPU affinity mask's size; ``None``: an OS without one, where ``os.cpu_count()`` says 8."""
    def make(affinity: int | None):
        if affinity is None:
            clean_env.delattr(policy.os, "sched_getaffinity", raising=False)
            clean_env.setattr(policy.os, "cpu_count", lambda: 8)
        else:
            clean_env.setattr(policy.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    return make


def test_pinned_to_four_cores_of_a_sixteen_core_machine_means_four(fake_machine):
    fake_machine(affinity=4)
    assert policy.usable_cores() == (4, "4 cores by CPU affinity")
    choice = policy.choose_threads("auto")
    assert choice.threads == 1 and "1, 2 and 4 are timed on the first training steps" in choice.reason


def test_without_an_affinity_mask_the_cpu_count_is_used_and_said(fake_machine):
    fake_machine(affinity=None)
    assert policy.usable_cores() == (8, "8 cores by os.cpu_count() (no affinity mask on this OS)")


def test_one_core_is_one_thread_with_nothing_to_measure(fake_machine):
    fake_machine(affinity=1)
    assert policy.choose_threads().threads == 1 and "one core" in policy.choose_threads().reason


class FakeSteps:
    """A clock and a thread setting: each step takes ``cost[threads]`` seconds, and the first step after a change
    of count ``first`` seconds more (its threads waking)."""

    def __init__(self, cost, first=0.0):
        self.cost, self.first, self.now, self.threads, self.applied = cost, first, 0.0, None, []
        self.fresh = False

    def apply(self, n):
        self.fresh = n != self.threads
        self.threads = n
        self.applied.append(n)

    def run(self, tuner, steps):
        for _ in range(steps):
            tuner.tick()
            self.now += self.cost[self.threads] + self.first * self.fresh
            self.fresh = False


def _tuner(steps: FakeSteps, **kw) -> policy.ThreadTuner:
    return policy.ThreadTuner([1, 2], "2 cores", clock=lambda: steps.now, apply=steps.apply, **kw)


@pytest.mark.parametrize("cost, best", [({1: 0.10, 2: 0.06}, 2), ({1: 0.10, 2: 0.40}, 1)])
def test_the_tuner_keeps_the_count_whose_steps_ran_quickest(cost, best):
    steps = FakeSteps(cost)
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.chosen == best and steps.threads == best
    assert steps.applied[:2] == [1, 2]  # each candidate timed, in turn
    assert len(tuner.times[2]) == (3 if best == 2 else 1)  # a count 4x slower is dropped after one step
    assert f"{best} measured quickest" in tuner.history[-1]


def test_the_first_two_steps_are_warm_up_and_not_counted():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    steps.now = 0.0
    tuner.tick()
    steps.now += 5.0  # slow first steps at 1 thread (allocations, imports): must not count against 1
    tuner.tick()
    steps.now += 2.0
    steps.run(tuner, 12)
    assert tuner.times[1] == pytest.approx([0.10] * 3)


def test_the_first_step_after_a_change_of_count_is_not_counted():
    # Sampling: 2 threads' first steps after the switch were slower than 1 thread's (its pools waking, MKL's
    # products warming up), and 1 thread was kept where 2 threads were 1.15x quicker.
    steps = FakeSteps({1: 0.10, 2: 0.08}, first=0.05)
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.times[2] == pytest.approx([0.08] * 3) and tuner.chosen == 2


def test_short_steps_are_timed_for_a_while_not_just_three_of_them():
    steps = FakeSteps({1: 0.004, 2: 0.003})  # a sampled token: a few milliseconds
    tuner = _tuner(steps)
    steps.run(tuner, 80)
    assert len(tuner.times[1]) == 13 and len(tuner.times[2]) == 17  # 0.05 s of steps each
    assert tuner.chosen == 2
    steps = FakeSteps({1: 1e-5, 2: 2e-5})
    tuner = _tuner(steps)
    steps.run(tuner, 200)
    assert len(tuner.times[1]) == 50 and tuner.chosen == 1  # however short the steps, at most 50 each


def test_a_steady_step_time_is_left_alone_until_the_periodic_recheck():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps, recheck=50)
    steps.run(tuner, 40)
    assert len(tuner.history) == 1 and steps.applied == [1, 2, 2]  # each count tried, then the one kept applied
    steps.run(tuner, 30)
    assert len(tuner.history) == 2  # measured again after 50 steady steps


def test_minigrad_threads_wins_over_everything(clean_env):
    clean_env.setenv("MINIGRAD_THREADS", "3")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "1")
    assert policy.choose_threads("auto") == (3, "MINIGRAD_THREADS=3 from the environment")
    assert policy.choose_threads(1).threads == 3


@pytest.mark.parametrize("name", policy.USER_THREAD_VARIABLES)
def test_a_thread_variable_the_user_set_is_the_count(clean_env, name):
    clean_env.setenv(name, "3")
    clean_env.setattr(policy, "usable_cores", lambda: pytest.fail("measured despite the user"))
    assert policy.choose_threads("auto") == (3, f"{name}=3 from the environment")
    assert policy.choose_threads(2).threads == 3  # the user's word over the script's


def test_of_several_thread_variables_the_least_is_the_count(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "4")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "2")
    assert policy.choose_threads("auto") == (2, "OPENBLAS_NUM_THREADS=2, OMP_NUM_THREADS=4 from the environment")


def test_a_thread_variable_that_is_not_a_count_leaves_the_pools_as_they_are(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "4,2")  # OpenMP's nested form: the libraries read it themselves
    assert policy.choose_threads("auto") == (None, "OMP_NUM_THREADS=4,2 from the environment")


def test_a_script_can_ask_for_a_count(clean_env):
    assert policy.choose_threads(1) == (1, "asked for by the script")


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", "\u00b2", "\u0663"])  # (a superscript 2, an Arabic 3)
def test_bad_minigrad_threads_is_a_clear_error(clean_env, value):
    clean_env.setenv("MINIGRAD_THREADS", value)
    with pytest.raises(ValueError, match="MINIGRAD_THREADS must be a positive whole number .*write e.g. "
                                         "MINIGRAD_THREADS=2"):
        policy.choose_threads()


def test_a_thread_variable_in_other_digits_is_no_count_and_leaves_the_pools(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "\u00b2")
    assert policy.choose_threads("auto") == (None, "OMP_NUM_THREADS=\u00b2 from the environment")


@pytest.mark.parametrize("value", [0, -1, 2.5, "fast", True])
def test_bad_policy_is_a_clear_error(clean_env, value):
    with pytest.raises(ValueError, match="set_threads: policy must be 'auto' or a positive int"):
        policy.choose_threads(value)


def test_minigrad_autotune_0_measures_nothing_but_a_count_asked_for_still_holds(clean_env):
    clean_env.setenv("MINIGRAD_AUTOTUNE", "0")
    clean_env.setattr(policy, "usable_cores", lambda: pytest.fail("measured despite MINIGRAD_AUTOTUNE=0"))
    assert policy.choose_threads("auto") == (None, "MINIGRAD_AUTOTUNE=0: left as the BLAS libraries started")
    assert policy.choose_threads(2) == (2, "asked for by the script")
    clean_env.setenv("MINIGRAD_THREADS", "3")
    assert policy.choose_threads("auto") == (3, "MINIGRAD_THREADS=3 from the environment")


def test_each_backward_ends_a_step_of_the_process_tuner(monkeypatch):
    from minigrad import nn

    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    monkeypatch.setattr(policy, "tuner", tuner)
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    for _ in range(12):
        model(mg.ones(1, 2)).sum().backward()  # (a forward alone is no step: evaluation, sampling)
        model(mg.ones(1, 2))
        steps.now += steps.cost[steps.threads]
    assert tuner.chosen == 2 and tuner.times[1] == pytest.approx([0.10] * 3)


SCRIPT = """
import json, os
import numpy
from threadpoolctl import threadpool_info
import minigrad as mg
from minigrad.kernels import policy
before = [p["num_threads"] for p in threadpool_info()]
choice = policy.set_threads(1)
print(json.dumps({"before": before, "after": [p["num_threads"] for p in threadpool_info()],
                  "choice": list(choice), "report": policy.report()["threads"]}))
"""


SET_BY_THE_USER = """
import json
from threadpoolctl import threadpool_info
import minigrad as mg
from minigrad.kernels import policy
choice = policy.set_threads()  # before the [fast] backend loads: its pools get the count when they load
pools = {p["internal_api"]: p["num_threads"] for p in mg.backend()["thread_pools"]}
print(json.dumps({"choice": list(choice), "pools": pools}))
"""


@pytest.mark.skipif(mg.backend()["gemm"] == "numpy", reason="MKL's GEMM: the [fast] extra, on x86-64 Linux")
def test_with_mkl_a_user_thread_count_keeps_openblas_at_one_thread_beside_mkl():
    # OPENBLAS_NUM_THREADS=2 left alone beside MKL's and numba's 2 threads: the pools spin against each other
    # on two cores. The user's count goes to MKL and numba; OpenBLAS keeps one.
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", SET_BY_THE_USER], capture_output=True, text=True, env=env,
                          check=True)
    result = json.loads(done.stdout)
    assert result["choice"][0] == 2 and "OPENBLAS_NUM_THREADS=2" in result["choice"][1]
    assert result["pools"]["openblas"] == 1 and result["pools"]["mkl"] == 2 and result["pools"]["numba"] == 2


FORWARD_ONLY = """
import json
import minigrad as mg
from minigrad import nn
from minigrad.kernels import policy
from threadpoolctl import threadpool_info
model = nn.Linear(128, 128)
model(mg.ones(64, 128))  # a forward: the backend is chosen, no backward() has run, no policy call was made
pools = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
print(json.dumps({"pools": pools, "report": policy.report()}))
"""


@pytest.mark.skipif(mg.backend()["gemm"] == "numpy", reason="MKL's GEMM: the [fast] extra, on x86-64 Linux")
def test_with_mkl_openblas_has_one_thread_from_the_first_product_on():
    # A plain script's first forward ran with OpenBLAS's threads spinning beside MKL's: each MKL product there
    # waited a time slice (7 ms for a 0.1 ms product), so the per-shape timing sent shapes to NumPy for good.
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and k != "MINIGRAD_AUTOTUNE"}
    done = subprocess.run([sys.executable, "-c", FORWARD_ONLY], capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["pools"]["openblas"] == 1
    assert result["report"]["openblas"].startswith("1 thread beside MKL")
    assert result["report"]["threads"].startswith("left as the BLAS libraries started")  # nothing else was touched


def test_set_threads_limits_every_loaded_pool():
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["after"] and all(n == 1 for n in result["after"])
    assert result["choice"] == [1, "asked for by the script"] and result["report"] == "1 (asked for by the script)"


PLAIN_LOOP = """
import json
import numpy as np
import minigrad as mg
from minigrad import nn, optim
from minigrad.kernels import policy
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = optim.AdamW(model.parameters(), lr=1e-3)
before = policy.report()
for _ in range(12):
    loss = (model(mg.ones(3, 4)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
backend = mg.backend()
pools = {p["internal_api"]: p["num_threads"] for p in backend["thread_pools"]}
print(json.dumps({"before": before, "after": policy.report(), "backend": backend["process"], "pools": pools,
                  "gemm": backend["gemm"]}))
"""


def _plain_loop(**env_vars) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and k != "MINIGRAD_AUTOTUNE"}
    env.update(env_vars)
    done = subprocess.run([sys.executable, "-c", PLAIN_LOOP], capture_output=True, text=True, env=env, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")
def test_a_plain_training_loop_is_tuned_at_its_first_backward_and_says_so():
    result = _plain_loop()
    assert "nothing asked for it yet" in result["before"]["malloc"]  # import changed nothing
    assert "at the first backward()" in result["after"]["malloc"]
    assert "auto" in result["after"]["threads"] and result["backend"] == result["after"]


def test_minigrad_autotune_0_leaves_a_plain_loop_as_it_was():
    result = _plain_loop(MINIGRAD_AUTOTUNE="0")
    assert "nothing asked for it yet" in result["after"]["malloc"]
    assert "nothing asked for it yet" in result["after"]["threads"]
    assert result["after"]["autotune"].startswith("off")
    assert result["after"]["openblas"].startswith("left as it was")
    if result["gemm"].startswith("mkl"):  # OpenBLAS's pool too: as it started, one thread per core
        assert result["pools"]["openblas"] == policy.usable_cores()[0] or os.cpu_count() == 1


def test_more_threads_that_turn_slow_are_measured_again_at_once():
    # On a busy machine a noisy trial kept 2 threads where 1 ran 5x quicker, for the rest of the run.
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.chosen == 2 and len(tuner.history) == 1
    steps.cost = {1: 0.12, 2: 0.50}  # other work starts: two threads now fight it for the cores
    steps.run(tuner, 12)
    assert tuner.chosen == 1 and steps.threads == 1 and len(tuner.history) == 2
    steps.cost = {1: 0.30, 2: 0.90}  # on the fewest threads slower steps say nothing new
    steps.run(tuner, 40)
    assert len(tuner.history) == 2


def test_a_count_clearly_slower_is_given_up_within_its_first_step(monkeypatch):
    # Beside two busy processes a 2-thread step took 1.5 s against 0.2 s on 1 thread: the trial gives 2
    # threads up at the first kernel call past 1.5x the 1-thread median, and the rest of the step runs on 1.
    steps = FakeSteps({1: 0.10, 2: 3.0})
    tuner = _tuner(steps)
    monkeypatch.setattr(policy, "tuner", tuner)
    steps.run(tuner, 5)
    assert tuner.deadline is None  # warm-up and the first count: nothing to compare with yet
    tuner.tick()  # 2 warm-up steps and 3 timed on 1 thread are over: the first 2-thread step starts
    assert steps.threads == 2 and tuner.deadline == pytest.approx(steps.now + 0.15)
    steps.now += 0.1
    mg.ones(2, 3).softmax(-1)  # a kernel call within the deadline: nothing happens
    assert steps.threads == 2
    steps.now += 0.1
    mg.ones(2, 3).softmax(-1)  # past it: back to 1 thread for the rest of the step, and the check disarmed
    assert steps.threads == 1 and tuner.deadline is None
    tuner.tick()  # the step ends: clearly slower; 1 thread is kept
    assert tuner.chosen == 1 and steps.applied[-1] == 1 and tuner.deadline is None


def test_a_later_set_threads_disarms_the_deadline_of_the_tuner_before(monkeypatch, clean_env):
    # A deadline left armed would give up a count the script has since fixed.
    steps = FakeSteps({1: 0.10, 2: 3.0})
    tuner = _tuner(steps)
    for name, value in (("tuner", tuner), ("_choice", None), ("_apply", lambda n: None)):
        monkeypatch.setattr(policy, name, value)
    steps.run(tuner, 6)  # warm-up, 3 steps on 1 thread: the 2-thread trial runs, its deadline armed
    assert tuner.deadline is not None
    assert policy.set_threads(1) == (1, "asked for by the script")
    assert policy.tuner is None
    steps.now += 10.0
    mg.ones(2, 3).softmax(-1)  # a kernel call long past the old deadline: nothing to give up
    assert steps.applied[-1] == 2


def test_a_ctrl_c_while_the_tuner_applies_a_count_leaves_later_steps_working():
    # A notebook's training loop interrupted inside the tuner, then run again: backward() must still work.
    steps = FakeSteps({1: 0.10, 2: 0.06})
    interrupt = [False]

    def apply(n):
        if interrupt[0]:
            raise KeyboardInterrupt
        steps.apply(n)

    tuner = policy.ThreadTuner([1, 2], "2 cores", clock=lambda: steps.now, apply=apply)
    steps.run(tuner, 5)
    interrupt[0] = True
    with pytest.raises(KeyboardInterrupt):
        steps.run(tuner, 1)  # the step that switches to 2 threads
    interrupt[0] = False
    steps.run(tuner, 20)  # the tuner measures no more; the steps go on
    assert steps.threads == 1 and tuner.chosen is None

"""The thread policy (minigrad/runtime.py): what it chooses, what overrides it, and that it is applied."""

import json
import os
import subprocess
import sys

import pytest

import minigrad as mg
from minigrad import runtime

THREAD_VARIABLES = ("MINIGRAD_THREADS", *runtime.USER_THREAD_VARIABLES)


@pytest.fixture
def clean_env(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _fake_tree(tmp_path, cgroup_lines: str, files: dict[str, str]):
    """A fake /proc/self/cgroup and cgroup file system under tmp_path."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup_lines)
    for path, text in files.items():
        f = tmp_path / "cg" / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return str(tmp_path / "proc"), str(tmp_path / "cg")


@pytest.fixture
def fake_machine(clean_env, tmp_path):
    """Point runtime at a fake /proc and cgroup tree; ``affinity`` sets the CPU affinity mask's size."""
    def make(cgroup_lines: str, files: dict[str, str], affinity: int | None = 16):
        proc, cg = _fake_tree(tmp_path, cgroup_lines, files)
        clean_env.setattr(runtime, "PROC", proc)
        clean_env.setattr(runtime, "CGROUP", cg)
        if affinity is None:
            clean_env.delattr(runtime.os, "sched_getaffinity", raising=False)
            clean_env.setattr(runtime.os, "cpu_count", lambda: 8)
        else:
            clean_env.setattr(runtime.os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    return make


def test_a_cgroup_v2_quota_caps_the_cores_of_a_container_on_a_big_host(fake_machine):
    fake_machine("0::/docker/abc\n", {"docker/abc/cpu.max": "200000 100000\n", "docker/cpu.max": "max 100000\n"})
    n, how = runtime.usable_cores()
    assert n == 2 and "16 cores by CPU affinity" in how and "cgroup v2 cpu.max 200000 100000" in how


def test_a_cgroup_v2_quota_of_a_parent_group_counts_and_a_fraction_rounds_up(fake_machine):
    fake_machine("0::/a/b\n", {"a/b/cpu.max": "max 100000\n", "a/cpu.max": "150000 100000\n"})
    assert runtime.usable_cores()[0] == 2


def test_a_cgroup_v1_cfs_quota_caps_the_cores(fake_machine):
    fake_machine("4:cpu,cpuacct:/job\n3:memory:/job\n",
                 {"cpu,cpuacct/job/cpu.cfs_quota_us": "300000\n", "cpu,cpuacct/job/cpu.cfs_period_us": "100000\n"})
    n, how = runtime.usable_cores()
    assert n == 3 and "cgroup v1" in how


def test_a_v1_quota_of_minus_one_is_no_limit_and_the_affinity_mask_counts(fake_machine):
    fake_machine("4:cpu,cpuacct:/\n", {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us":
                                         "100000\n"}, affinity=4)
    assert runtime.usable_cores() == (4, "4 cores by CPU affinity; cgroup: no CPU quota")


def test_pinned_to_four_cores_of_a_sixteen_core_machine_means_four(fake_machine):
    fake_machine("0::/\n", {"cpu.max": "max 100000\n"}, affinity=4)
    assert runtime.usable_cores()[0] == 4
    choice = runtime.choose_threads("auto")
    assert choice.threads == 1 and "measuring 1 and 4 threads" in choice.reason


def test_without_proc_or_affinity_the_plain_rule_is_used_and_said(fake_machine, monkeypatch, tmp_path):
    fake_machine("", {}, affinity=None)
    monkeypatch.setattr(runtime, "PROC", str(tmp_path / "nowhere"))
    n, how = runtime.usable_cores()
    assert n == 8 and "os.cpu_count()" in how and "no /proc/self/cgroup" in how


def test_one_core_is_one_thread_with_nothing_to_measure(fake_machine):
    fake_machine("0::/\n", {}, affinity=1)
    assert runtime.choose_threads().threads == 1 and "one core" in runtime.choose_threads().reason


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


def _tuner(steps: FakeSteps, **kw) -> runtime.ThreadTuner:
    return runtime.ThreadTuner([1, 2], "2 cores", clock=lambda: steps.now, apply=steps.apply, say=False, **kw)


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


def test_of_counts_within_ten_percent_the_fewest_threads_are_kept_and_said_so():
    steps = FakeSteps({1: 0.100, 2: 0.095})  # 2 threads 5% quicker: not worth a second core
    tuner = _tuner(steps)
    steps.run(tuner, 14)
    assert tuner.chosen == 1 and steps.threads == 1 and tuner.tied
    assert "1 kept, the fewest measured within 10% of the quickest" in tuner.history[-1]
    steps = FakeSteps({1: 0.100, 2: 0.085})  # 15% quicker: 2 threads earn their core
    tuner = _tuner(steps)
    steps.run(tuner, 14)
    assert tuner.chosen == 2 and not tuner.tied and "2 measured quickest" in tuner.history[-1]


def test_after_a_tie_the_counts_are_measured_again_once_the_hold_has_passed():
    # The demo's training on an idle machine: a noisy first trial measured 1 and 2 threads alike, where 2
    # threads train faster; a tie is no answer.
    steps = FakeSteps({1: 0.080, 2: 0.078})
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.chosen == 1 and tuner.tied
    steps.cost = {1: 0.075, 2: 0.055}
    steps.run(tuner, 10)
    assert len(tuner.history) == 1  # the hold: ten steady steps
    steps.run(tuner, 10)
    assert tuner.chosen == 2 and not tuner.tied and len(tuner.history) == 2
    steps.run(tuner, 40)
    assert len(tuner.history) == 2  # a clear answer: left alone


def test_after_a_tie_steps_that_grow_are_measured_again():
    # demos.sample: the first tokens' products are too small for the BLAS to use a second thread, so 1 and 2
    # threads ran the same code; later, with a longer context, 2 threads beside a busy process took 4x as long.
    steps = FakeSteps({1: 0.003, 2: 0.003})
    tuner = _tuner(steps)
    steps.run(tuner, 60)
    assert tuner.chosen == 1 and tuner.tied and len(tuner.history) == 1
    steps.cost = {1: 0.008, 2: 0.030}  # the work grew: now the counts differ
    steps.run(tuner, 100)
    assert tuner.chosen == 1 and not tuner.tied and len(tuner.history) == 2
    steps.cost = {1: 0.016, 2: 0.060}  # slower again on 1 thread: after a clear answer, nothing new
    steps.run(tuner, 200)
    assert len(tuner.history) == 2
    steps = FakeSteps({1: 0.003, 2: 0.003})  # on an idle machine the bigger steps share well
    tuner = _tuner(steps)
    steps.run(tuner, 60)
    steps.cost = {1: 0.008, 2: 0.005}
    steps.run(tuner, 150)
    assert tuner.chosen == 2 and steps.threads == 2


def test_steps_shorter_than_50_ms_count_as_their_part_of_a_step_before_a_new_measurement():
    # Beside busy processes a token's step wanders as the scheduler moves the load about; counted whole, ten
    # tokens were enough to try 2 threads again, several times in one sample.
    steps = FakeSteps({1: 0.004, 2: 0.030})
    tuner = _tuner(steps)
    steps.run(tuner, 40)
    assert tuner.chosen == 1 and len(tuner.history) == 1
    steps.cost = {1: 0.002, 2: 0.030}  # quicker on 1 thread: perhaps the load went away
    steps.run(tuner, 60)
    assert len(tuner.history) == 1  # 60 steps of 2 to 4 ms: about 3 steps' worth, not yet 10
    steps.run(tuner, 300)
    assert len(tuner.history) == 2 and tuner.chosen == 1  # measured again once half a second had passed
    steps = FakeSteps({1: 0.004, 2: 0.003})  # on 2 threads each step counts whole, to leave them soon
    tuner = _tuner(steps)
    steps.run(tuner, 50)
    assert tuner.chosen == 2
    steps.cost = {1: 0.005, 2: 0.012}  # busy processes started
    steps.run(tuner, 40)
    assert tuner.chosen == 1 and len(tuner.history) == 2


def test_the_tuner_measures_again_when_the_step_time_drifts():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.chosen == 2
    steps.cost = {1: 0.12, 2: 0.50}  # another program starts: two threads now fight it for the cores
    steps.run(tuner, 16)
    assert tuner.chosen == 1 and steps.threads == 1 and len(tuner.history) == 2


def test_a_steady_step_time_is_left_alone_until_the_periodic_recheck():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps, recheck=50)
    steps.run(tuner, 40)
    assert len(tuner.history) == 1 and steps.applied == [1, 2, 2]  # each count tried, then the one kept applied
    steps.run(tuner, 30)
    assert len(tuner.history) == 2  # measured again after 50 steady steps


def test_a_top_level_model_call_is_a_step_and_its_submodules_are_not(monkeypatch):
    from minigrad import modes, nn

    ticks = []
    monkeypatch.setattr(modes, "step_clock", lambda source="model": ticks.append(source))
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    for _ in range(3):
        model(mg.ones(1, 2)).sum().backward()
    assert ticks == ["model", "backward"] * 3


def test_without_a_model_each_backward_is_a_step_and_with_one_only_model_calls_count():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    for _ in range(12):
        tuner.tick("backward")
        steps.now += steps.cost[steps.threads]
    assert tuner.chosen == 2  # a loop of plain tensors is timed backward to backward
    before = dict(tuner.times)
    tuner.tick("model")  # a model turns up: its calls are the steps from now on, timed afresh
    assert tuner.chosen == 2 and tuner.times != before and all(not v for v in tuner.times.values())
    steps.now += 1.0
    tuner.tick("backward")
    assert tuner.last != steps.now  # backward no longer counts


def test_minigrad_threads_wins_over_everything(clean_env):
    clean_env.setenv("MINIGRAD_THREADS", "3")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "1")
    assert runtime.choose_threads("auto") == (3, "MINIGRAD_THREADS=3")
    assert runtime.choose_threads(1).threads == 3


@pytest.mark.parametrize("name", runtime.USER_THREAD_VARIABLES)
def test_a_thread_variable_the_user_set_is_the_count(clean_env, name):
    clean_env.setenv(name, "3")
    clean_env.setattr(runtime, "usable_cores", lambda: pytest.fail("measured despite the user"))
    assert runtime.choose_threads("auto") == (3, f"{name}=3 from the environment")
    assert runtime.choose_threads(2).threads == 3  # the user's word over the script's


def test_of_several_thread_variables_the_least_is_the_count(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "4")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "2")
    assert runtime.choose_threads("auto") == (2, "OPENBLAS_NUM_THREADS=2, OMP_NUM_THREADS=4 from the environment")


def test_a_thread_variable_that_is_not_a_count_leaves_the_pools_as_they_are(clean_env):
    clean_env.setenv("OMP_NUM_THREADS", "4,2")  # OpenMP's nested form: the libraries read it themselves
    assert runtime.choose_threads("auto") == (None, "OMP_NUM_THREADS=4,2 from the environment")


def test_a_script_can_ask_for_a_count(clean_env):
    assert runtime.choose_threads(1) == (1, "asked for by the script")


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_minigrad_threads_is_a_clear_error(clean_env, value):
    clean_env.setenv("MINIGRAD_THREADS", value)
    with pytest.raises(ValueError, match="MINIGRAD_THREADS must be a positive whole number"):
        runtime.choose_threads()


@pytest.mark.parametrize("policy", [0, -1, 2.5, "fast", True])
def test_bad_policy_is_a_clear_error(clean_env, policy):
    with pytest.raises(ValueError, match="set_threads: policy must be 'auto' or a positive int"):
        runtime.choose_threads(policy)


SCRIPT = """
import json, os
import numpy
from threadpoolctl import threadpool_info
import minigrad as mg
from minigrad import runtime
before = [p["num_threads"] for p in threadpool_info()]
choice = runtime.set_threads(1)
print(json.dumps({"before": before, "after": [p["num_threads"] for p in threadpool_info()],
                  "choice": list(choice), "kept": list(runtime.thread_choice())}))
"""


SET_BY_THE_USER = """
import json
from threadpoolctl import threadpool_info
from minigrad import runtime
choice = runtime.set_threads()
pools = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
print(json.dumps({"choice": list(choice), "pools": pools, "numba": runtime.thread_pools()[-1]["num_threads"]}))
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
    assert result["pools"]["openblas"] == 1 and result["pools"]["mkl"] == 2 and result["numba"] == 2


FORWARD_ONLY = """
import json
import minigrad as mg
from minigrad import nn, runtime
from threadpoolctl import threadpool_info
model = nn.Linear(128, 128)
model(mg.ones(64, 128))  # a forward: the backend is chosen, no backward() has run, no runtime call was made
pools = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
print(json.dumps({"pools": pools, "report": runtime.report()}))
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
    assert result["report"]["threads"].startswith("left as the BLAS library started")  # nothing else was touched


def test_set_threads_limits_every_loaded_pool():
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["after"] and all(n == 1 for n in result["after"])
    assert result["choice"] == result["kept"] == [1, "asked for by the script"]


PLAIN_LOOP = """
import json
import numpy as np
import minigrad as mg
from minigrad import nn, optim, runtime
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = optim.AdamW(model.parameters(), lr=1e-3)
before = runtime.report()
for _ in range(12):
    loss = (model(mg.ones(3, 4)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(json.dumps({"before": before, "after": runtime.report(), "backend": mg.backend()["runtime"]}))
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


def test_a_measurement_that_keeps_the_same_count_waits_twice_as_long_before_the_next():
    steps = FakeSteps({1: 0.10, 2: 0.06})
    tuner = _tuner(steps)
    steps.run(tuner, 12)
    assert tuner.chosen == 2 and tuner.hold == 10
    steps.cost = {1: 0.20, 2: 0.09}  # everything slower, 2 threads still quicker
    steps.run(tuner, 34)
    assert tuner.chosen == 2 and len(tuner.history) == 2 and tuner.hold == 20


def test_on_one_thread_slower_steps_change_nothing_and_quicker_ones_measure_again():
    steps = FakeSteps({1: 0.10, 2: 0.40})
    tuner = _tuner(steps)
    steps.run(tuner, 16)
    assert tuner.chosen == 1 and tuner.baseline == pytest.approx(0.10)  # from the first steady steps
    steps.cost = {1: 0.20, 2: 0.80}  # more load: one thread is still the right count
    steps.run(tuner, 40)
    assert len(tuner.history) == 1 and steps.applied == [1, 2, 1]
    steps.cost = {1: 0.05, 2: 0.03}  # the other work stopped: steps quicker, and two threads now win
    steps.run(tuner, 20)
    assert tuner.chosen == 2 and len(tuner.history) == 2


def test_a_count_clearly_slower_is_given_up_within_its_first_step():
    # Beside a busy process a 2-thread step took 20 to 30 times a 1-thread one: the trial gives 2 threads up at
    # the first kernel call past 1.5x the 1-thread median, and the rest of the step runs on 1 thread.
    steps = FakeSteps({1: 0.10, 2: 3.0})
    tuner = _tuner(steps)
    steps.run(tuner, 5)
    tuner.tick()  # 2 warm-up steps and 3 timed on 1 thread are over: the first 2-thread step starts
    assert steps.threads == 2 and tuner.deadline == pytest.approx(steps.now + 0.15)
    steps.now += 0.1
    tuner._past_deadline()  # a kernel call within the deadline: nothing happens
    assert steps.threads == 2
    steps.now += 0.1
    tuner._past_deadline()  # past it: back to the quickest count so far, for the rest of the step
    assert steps.threads == 1 and tuner.deadline is None
    tuner.tick()  # the step ends: 0.2 s, clearly slower than 0.1; 1 thread is kept
    assert tuner.chosen == 1 and steps.applied[-1] == 1


def test_the_process_tuner_arms_each_kernel_call_only_while_it_tries_a_count(monkeypatch):
    from minigrad import modes

    steps = FakeSteps({1: 0.10, 2: 3.0})
    tuner = _tuner(steps)
    monkeypatch.setattr(runtime, "_tuner", tuner)
    monkeypatch.setattr(modes, "step_deadline", None)
    steps.run(tuner, 5)
    assert modes.step_deadline is None  # warm-up and the first count: nothing to compare with yet
    tuner.tick()
    assert modes.step_deadline == tuner._past_deadline  # trying 2 threads: each kernel call checks the clock
    steps.now += 1.0
    mg.ones(2, 3).softmax(-1)  # a kernel call past the deadline gives 2 threads up, and disarms the check
    assert steps.threads == 1 and modes.step_deadline is None
    tuner.tick()
    assert tuner.chosen == 1 and modes.step_deadline is None

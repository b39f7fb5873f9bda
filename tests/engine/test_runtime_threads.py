"""The thread policy (minigrad/runtime.py): what it chooses, what overrides it, and that it is applied."""

import json
import os
import subprocess
import sys

import pytest

from minigrad import runtime

THREAD_VARIABLES = ("MINIGRAD_THREADS", *runtime.USER_THREAD_VARIABLES)


@pytest.fixture
def clean_env(monkeypatch):
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("n_cores, busy, expected", [
    (2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 1.0, 1), (2, 2.0, 1), (2, 5.0, 1),
    (8, 0.3, 8), (8, 2.6, 5), (8, 7.9, 1),
])
def test_auto_gives_the_cores_other_work_leaves_free(clean_env, n_cores, busy, expected):
    clean_env.setattr(runtime, "cores", lambda: n_cores)
    clean_env.setattr(runtime, "busy_cores", lambda interval=0.1: busy)
    choice = runtime.choose_threads("auto")
    assert choice.threads == expected
    assert f"{n_cores} cores" in choice.reason and f"{busy:.1f} kept busy" in choice.reason


def test_one_core_needs_no_look(clean_env):
    clean_env.setattr(runtime, "cores", lambda: 1)
    clean_env.setattr(runtime, "busy_cores", lambda interval=0.1: pytest.fail("measured on one core"))
    assert runtime.choose_threads().threads == 1


def test_minigrad_threads_wins_over_everything(clean_env):
    clean_env.setenv("MINIGRAD_THREADS", "3")
    clean_env.setenv("OPENBLAS_NUM_THREADS", "1")
    assert runtime.choose_threads("auto") == (3, "MINIGRAD_THREADS=3")
    assert runtime.choose_threads(1).threads == 3


@pytest.mark.parametrize("name", runtime.USER_THREAD_VARIABLES)
def test_a_thread_variable_the_user_set_is_respected(clean_env, name):
    clean_env.setenv(name, "1")
    clean_env.setattr(runtime, "busy_cores", lambda interval=0.1: pytest.fail("measured despite the user"))
    choice = runtime.choose_threads("auto")
    assert choice.threads is None and name in choice.reason


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


def test_busy_cores_is_a_count_of_cores():
    busy = runtime.busy_cores(0.05)
    assert 0.0 <= busy <= (os.cpu_count() or 1) + 0.5  # (clock ticks are coarse)


SCRIPT = """
import json, os
import numpy
from threadpoolctl import threadpool_info
from minigrad import runtime
before = [p["num_threads"] for p in threadpool_info()]
choice = runtime.set_threads(1)
print(json.dumps({"before": before, "after": [p["num_threads"] for p in threadpool_info()],
                  "choice": list(choice), "kept": list(runtime.thread_choice())}))
"""


def test_set_threads_limits_every_loaded_pool():
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    result = json.loads(done.stdout)
    assert result["after"] and all(n == 1 for n in result["after"])
    assert result["choice"] == result["kept"] == [1, "asked for by the script"]

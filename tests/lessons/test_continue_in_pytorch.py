"""demos.continue_in_pytorch: a minigrad run exported in GPT-2's format keeps training in transformers'
GPT2LMHeadModel under torch.distributed (2 CPU processes, gloo), on the same batches and tokenizer.

The first PyTorch loss is the loss minigrad computes at its next step (the same weights, the same batch,
drawn from the generator saved in the checkpoint), to float32 precision; a few DDP steps lower the
loss on that batch. Skipped without torch and transformers.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demos import charlm_run, continue_in_pytorch, train_charlm
from models import GPT

TINY = ["--block-size", "16", "--batch-size", "4", "--n-layer", "1", "--n-head", "2", "--d-model", "16",
        "--lr", "1e-2", "--warmup-steps", "2", "--eval-every", "3", "--eval-batches", "2", "--sample-every", "0",
        "--position", "learned", "--quiet"]


@pytest.fixture(scope="module")
def text_file(word_salad):
    return word_salad("the model reads every token and learns which one comes next in the text")


def torchrun(folder: Path, out: Path, steps: int, lr: float) -> subprocess.CompletedProcess:
    """The README's torchrun command. One that has not finished in 300 s is a failure that shows what it printed;
    torchrun is stopped with SIGTERM, on which it stops its workers (a SIGKILL would leave them running)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               "-m", "demos.continue_in_pytorch", "train", str(folder), "--steps", str(steps), "--lr", str(lr),
               "--out", str(out), "--sample-tokens", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as agent:
        try:
            stdout, stderr = agent.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            agent.terminate()
            try:
                stdout, stderr = agent.communicate(timeout=60)
            except subprocess.TimeoutExpired:  # (torchrun itself stuck: leaving the with block would wait for ever)
                agent.kill()
                stdout, stderr = agent.communicate()
            pytest.fail(f"torchrun did not finish in 300 s; what it printed:\n{stdout[-3000:]}\n{stderr[-3000:]}")
    return subprocess.CompletedProcess(command, agent.returncode, stdout, stderr)


def test_pytorch_ddp_continues_where_minigrad_stopped(text_file, tmp_path):
    """With the BPE tokenizer (a char run goes the same way: the tokenizer is only a file to the script)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    run = tmp_path / "run"
    train_charlm.main(["--text", str(text_file), *TINY, "--tokenizer", "bpe", "--vocab-size", "300",
                       "--steps", "6", "--out", str(run)])
    exported = continue_in_pytorch.main(["export", str(run)])
    assert {"model.safetensors", "config.json", "tokenizer.json", "minigrad_run.json"} <= \
           {p.name for p in exported.iterdir()}

    done = torchrun(exported, tmp_path / "pytorch", steps=4, lr=1e-2)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "pytorch" / "losses.json").read_text())
    assert result["world_size"] == 2 and result["backend"] == "gloo" and len(result["losses"]) == 4

    # minigrad's own step 7, on the same batch from the same generator state, with the same weights.
    minigrad = train_charlm.main(["--resume", str(run), "--steps", "7", "--quiet"])
    assert result["losses"][0] == pytest.approx(minigrad["train_losses"][6], rel=2e-6)
    assert result["first_batch_loss_after"] < result["first_batch_loss_before"] - 0.05  # DDP training learns

    # The result comes back into minigrad: the same loss on that batch.
    back = GPT.from_gpt2(tmp_path / "pytorch")
    x, y = first_batch(exported)
    assert back(x, y)[1].item() == pytest.approx(result["first_batch_loss_after"], rel=2e-6)


def first_batch(exported: Path):
    handoff, _, train_ids, rng, _ = continue_in_pytorch.load_handoff(exported)
    cfg = charlm_run.TrainConfig(**handoff["train"])
    from demos import charlm_data

    return charlm_data.get_batch(train_ids, cfg.batch_size * cfg.grad_accum, cfg.block_size, rng)


def test_export_names_what_gpt2_cannot_hold(text_file, tmp_path, capsys):
    run = tmp_path / "rope"
    at = TINY.index("--position")
    train_charlm.main(["--text", str(text_file), *TINY[:at], *TINY[at + 2:], "--steps", "3", "--out", str(run)])
    with pytest.raises(SystemExit) as exit_info:
        continue_in_pytorch.main(["export", str(run)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "position='rope' (GPT-2: 'learned')" in err and "--position learned" in err
    assert not (run / "gpt2" / "model.safetensors").exists()


@pytest.fixture(scope="module")
def small_run(text_file, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "small"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "3", "--out", str(run)])
    return run


def files_in(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where, message", [
    (lambda run, tmp: run, "already holds a run of python -m demos.train_charlm"),
    (lambda run, tmp: run / "config.json", "is a file"),
    (lambda run, tmp: tmp, "already holds files"),
])
def test_export_out_refuses_a_run_a_file_or_a_non_empty_folder_and_writes_nothing(small_run, tmp_path, capsys,
                                                                                   where, message):
    (tmp_path / "notes.txt").write_text("mine")
    out = where(small_run, tmp_path)
    before_run, before_tmp = files_in(small_run), files_in(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        continue_in_pytorch.main(["export", str(small_run), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err
    assert files_in(small_run) == before_run and files_in(tmp_path) == before_tmp  # not one byte written
    train_charlm.main(["--resume", str(small_run), "--steps", "4", "--quiet"])  # the run still resumes


def test_train_out_refuses_a_run_before_any_process_starts(small_run, tmp_path, monkeypatch, capsys):
    """``train --out RUN`` would have written GPT-2's config.json over the run's own, as export did."""
    exported = continue_in_pytorch.main(["export", str(small_run), "--out", str(tmp_path / "gpt2")])
    before = files_in(small_run)
    monkeypatch.setenv("RANK", "0")  # as under torchrun; the check comes before torch is imported
    with pytest.raises(SystemExit) as exit_info:
        continue_in_pytorch.main(["train", str(exported), "--out", str(small_run)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "already holds a run" in err and files_in(small_run) == before


def test_export_prints_a_torchrun_command_that_works_as_printed(small_run, tmp_path, capsys):
    """By this interpreter (``<python> -m torch.distributed.run``), not a bare ``torchrun`` that is on PATH only
    in an activated venv."""
    from demos._common import python_command

    out = continue_in_pytorch.main(["export", str(small_run), "--out", str(tmp_path / "gpt2")])
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("continue with:"))
    assert line == (f"continue with: {python_command()} -m torch.distributed.run --standalone --nproc_per_node 2 "
                    f"-m demos.continue_in_pytorch train {out}")


def test_train_outside_torchrun_and_a_missing_export_are_clear_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        continue_in_pytorch.main(["export", str(tmp_path / "nowhere")])
    assert "no config.json there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        continue_in_pytorch.main(["train", str(tmp_path)])
    assert "runs under torchrun" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        continue_in_pytorch.main(["train", str(tmp_path), "--sample-tokens", "-5"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--sample-tokens must be 0 (no sample) or more, got -5" in err


@pytest.mark.parametrize("option, named", [
    (dict(position="sinusoidal"), "position='sinusoidal' (GPT-2: 'learned')"),
    (dict(position="rope"), "position='rope' (GPT-2: 'learned')"),
    (dict(norm="rmsnorm"), "norm='rmsnorm' (GPT-2: 'layernorm')"),
    (dict(mlp="swiglu"), "mlp='swiglu' (GPT-2: 'gelu')"),
    (dict(bias=False), "bias=False (GPT-2: True)"),
    (dict(n_kv_head=1), "n_kv_head=1 (GPT-2 has one key/value head per query head: 2)"),
])
def test_save_gpt2_names_each_option_gpt2_cannot_hold(tmp_path, option, named):
    from models import GPTConfig

    model = GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, d_model=8, **option), seed=0)
    with pytest.raises(ValueError, match="not GPT-2-shaped") as info:
        model.save_gpt2(tmp_path / "out")
    assert named in str(info.value) and not (tmp_path / "out").exists()


def test_save_gpt2_refuses_a_model_that_is_not_a_gpt(tmp_path):
    from models import RNNLM, RNNConfig
    from models.gpt2 import save_gpt2

    with pytest.raises(TypeError, match="expected a models.GPT, got RNNLM"):
        save_gpt2(RNNLM(RNNConfig(vocab_size=5, cell="lstm", d_model=4, hidden_size=4), seed=0), tmp_path / "x")


def test_train_refused_under_torchrun_says_why_in_torchruns_summary(tmp_path):
    """torchrun prints its own traceback after a process fails; the reason is in its summary ("Root Cause"), the
    part printed last, and once above it, not once per process."""
    pytest.importorskip("torch")
    (tmp_path / "result").mkdir()
    (tmp_path / "result" / "notes.txt").write_text("mine")
    done = torchrun(tmp_path / "gpt2", tmp_path / "result", steps=500, lr=1e-3)
    why = f"--out {tmp_path / 'result'} already holds files"
    assert done.returncode != 0
    above, summary = done.stderr.split("Traceback (most recent call last)", 1)[0], done.stderr.split("Root Cause")[1]
    assert above.count(f"{continue_in_pytorch.PROG}: error: {why}") == 1
    assert f"traceback : {continue_in_pytorch.PROG}: error: {why}" in summary
    assert (tmp_path / "result").exists() and os.listdir(tmp_path / "result") == ["notes.txt"]

"""The main demo with a BPE tokenizer, gradient accumulation (the same update as one big batch, clipping on),
extending a finished run with --resume --steps, the line after Ctrl-C, and the printed commands."""

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from demos import charlm_run, sample, train_charlm
from demos._common import python_command
from minigrad import optim
from models import GPT, GPTConfig
from models.tokenizer import BPETokenizer, load_tokenizer

TINY = ["--block-size", "16", "--batch-size", "4", "--n-layer", "1", "--n-head", "2", "--d-model", "16",
        "--lr", "1e-2", "--warmup-steps", "2", "--eval-every", "4", "--eval-batches", "2", "--sample-every", "0",
        "--quiet"]


@pytest.fixture(scope="module")
def text_file(word_salad):
    """Some accented words: a BPE learns the words, and the bytes differ from the characters."""
    return word_salad("the model reads every byte and learns which one comes next in the text café naïve")


# --------------------------------------------------------------------------------------
# BPE runs
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bpe_run(text_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "bpe"
    metrics = train_charlm.main(["--text", str(text_file), "--tokenizer", "bpe", "--vocab-size", "300", *TINY,
                                 "--steps", "12", "--out", str(folder)])
    return folder, metrics


def test_a_bpe_run_saves_its_tokenizer_and_reports_bits_per_byte(bpe_run, text_file):
    folder, metrics = bpe_run
    tok = load_tokenizer(folder / "tokenizer.json")
    assert isinstance(tok, BPETokenizer) and tok.vocab_size == metrics["vocab_size"] <= 300
    settings = json.loads((folder / "config.json").read_text())
    assert settings["train"]["tokenizer"] == "bpe" and settings["model"]["vocab_size"] == tok.vocab_size
    text = text_file.read_text()
    val_text = text[len(text) - round(len(text) * 0.1):]
    assert metrics["val_tokens_per_byte"] == len(tok.encode(val_text)) / len(val_text.encode())
    assert metrics["val_tokens_per_byte"] < 0.5  # BPE: a few bytes per token
    assert metrics["final_val_bpb"] == pytest.approx(metrics["final_val_bits_per_token"]
                                                     * metrics["val_tokens_per_byte"])
    assert metrics["val_losses"][-1][1] < metrics["val_losses"][0][1] - 0.2  # it learns


def test_bits_per_byte_of_a_char_run_on_non_ascii_text(text_file, tmp_path):
    metrics = train_charlm.main(["--text", str(text_file), *TINY, "--steps", "4", "--out", str(tmp_path / "c")])
    text = text_file.read_text()
    assert metrics["val_tokens_per_byte"] < 1  # é and ï: one character, two bytes
    assert metrics["train_tokens_per_byte"] == pytest.approx(len(text) / len(text.encode()), rel=0.01)


def test_demos_sample_reads_the_bpe_tokenizer(bpe_run, capsys):
    folder, _ = bpe_run
    args = [str(folder), "--prompt", "the café", "--max-new-tokens", "12", "--seed", "3"]
    first = sample.main(args)
    assert first[0].startswith("the café") and len(first[0]) > len("the café")
    assert sample.main([*args, "--no-cache"]) == first
    assert sample.main([str(folder), "--prompt", "日本", "--max-new-tokens", "3"])[0].startswith("日本")  # bytes


def test_a_bpe_run_resumes_exactly(text_file, tmp_path, bpe_run):
    _, whole = bpe_run
    folder = tmp_path / "pieces"
    train_charlm.main(["--text", str(text_file), "--tokenizer", "bpe", "--vocab-size", "300", *TINY,
                       "--steps", "12", "--out", str(folder), "--stop-after", "5"])
    final = train_charlm.main(["--resume", str(folder), "--quiet"])
    assert final["train_losses"] == whole["train_losses"]


# --------------------------------------------------------------------------------------
# Gradient accumulation
# --------------------------------------------------------------------------------------


def tiny_float64_run(grad_accum: int, grad_clip: float):
    model = GPT(GPTConfig(vocab_size=11, block_size=6, n_layer=1, n_head=2, d_model=8), seed=0).double()
    cfg = charlm_run.TrainConfig(grad_accum=grad_accum, grad_clip=grad_clip, steps=10, warmup_steps=0)
    optimizer, scheduler = charlm_run.build_optimizer(model, cfg)
    return types.SimpleNamespace(model=model, cfg=cfg, optimizer=optimizer, scheduler=scheduler, updating=False)


def test_micro_batches_give_the_update_of_the_whole_batch_with_clipping_on():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, size=(2, 8, 6))  # one batch of 8 windows of 6 tokens
    grad_clip = 0.05
    whole, pieces = tiny_float64_run(1, grad_clip), tiny_float64_run(4, grad_clip)

    loss = train_charlm.accumulate_gradients(whole.model, x, y, 1)
    norm = optim.clip_grad_norm_(whole.model.parameters(), np.inf)  # (max_norm inf: measures, clips nothing)
    assert norm > 4 * grad_clip  # so the clip below really changes the update
    for _ in range(3):  # three steps on the same batch: AdamW's moments and the schedule move on too
        losses = [train_charlm.train_step(run, x, y) for run in (whole, pieces)]
        assert losses[1] == pytest.approx(losses[0], rel=1e-12)
    assert losses[0] < loss  # the steps did something
    for (name, p), q in zip(whole.model.named_parameters(), pieces.model.parameters()):
        np.testing.assert_allclose(q.data, p.data, rtol=0, atol=1e-12, err_msg=name)


def test_the_clip_sees_the_whole_batch_gradient_not_n_times_it():
    """What the scaling is for: without dividing each micro-batch's loss by N, the summed gradient is N times
    the batch's, and the clip compares that with --grad-clip (in effect clipping at grad_clip / N)."""
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 11, size=(2, 8, 6))
    scaled, whole, unscaled = (tiny_float64_run(1, 1).model for _ in range(3))
    train_charlm.accumulate_gradients(scaled, x, y, 4)
    train_charlm.accumulate_gradients(whole, x, y, 1)
    unscaled.zero_grad()
    for xs, ys in zip(np.split(x, 4), np.split(y, 4)):
        unscaled(xs, ys)[1].backward()  # the classic bug: each micro-batch's mean loss, summed
    norms = [optim.clip_grad_norm_(m.parameters(), np.inf) for m in (scaled, whole, unscaled)]
    assert norms[0] == pytest.approx(norms[1], rel=1e-12) and norms[2] == pytest.approx(4 * norms[1], rel=1e-12)


def test_the_demo_with_grad_accum_matches_one_batch_four_times_larger(text_file, tmp_path):
    common = ["--text", str(text_file), *TINY, "--steps", "6"]
    at = common.index("--batch-size")
    big = train_charlm.main([*common[:at], *common[at + 2:], "--batch-size", "8", "--out", str(tmp_path / "big")])
    accum = train_charlm.main([*common[:at], *common[at + 2:], "--batch-size", "2", "--grad-accum", "4",
                               "--out", str(tmp_path / "accum")])
    # The same windows each step (drawn as one batch, then split); float32 sums in another order.
    np.testing.assert_allclose(accum["train_losses"], big["train_losses"], rtol=2e-5)


def test_grad_accum_validates_on_the_windows_of_the_larger_batch(text_file, tmp_path):
    """The validation batches are drawn as the training ones are (B x N windows), so the validation losses
    of --batch-size 2 --grad-accum 4 are those of --batch-size 8, as the README says."""
    common = ["--text", str(text_file), *TINY, "--steps", "4", "--sample-every", "0"]
    at = common.index("--batch-size")
    big = train_charlm.main([*common[:at], *common[at + 2:], "--batch-size", "8", "--out", str(tmp_path / "big")])
    accum = train_charlm.main([*common[:at], *common[at + 2:], "--batch-size", "2", "--grad-accum", "4",
                               "--out", str(tmp_path / "accum")])
    assert [s for s, _ in accum["val_losses"]] == [s for s, _ in big["val_losses"]] == [4]
    np.testing.assert_allclose([v for _, v in accum["val_losses"]], [v for _, v in big["val_losses"]], rtol=2e-5)


# --------------------------------------------------------------------------------------
# Extending a run, Ctrl-C, the printed commands
# --------------------------------------------------------------------------------------


def test_resume_with_more_steps_extends_a_finished_run_at_the_final_learning_rate(text_file, tmp_path, capsys):
    folder = tmp_path / "run"
    first = train_charlm.main(["--text", str(text_file), *TINY, "--steps", "8", "--out", str(folder)])
    assert first["stopped"] == "finished"
    capsys.readouterr()
    more = train_charlm.main(["--resume", str(folder), "--steps", "12", "--quiet"])
    assert more["stopped"] == "finished" and more["step"] == 12 and len(more["train_losses"]) == 12
    assert more["train_losses"][:8] == first["train_losses"]
    out = capsys.readouterr().out
    assert "cosine to 0.001 by step 8, then constant" in out
    assert re.search(r"step +12/12 .* lr 1\.00e-03 ", out)  # lr 1e-2 x min-lr-ratio 0.1, past the schedule's end
    settings = json.loads((folder / "config.json").read_text())["train"]
    assert settings["steps"] == 12 and settings["decay_steps"] == 8
    again = train_charlm.main(["--resume", str(folder), "--steps", "14", "--quiet"])  # and again, same rule
    assert again["train_losses"][:12] == more["train_losses"] and again["step"] == 14


def test_an_extended_run_equals_one_resumed_in_pieces(text_file, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "8", "--out", str(a)])
    whole = train_charlm.main(["--resume", str(a), "--steps", "12", "--quiet"])
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "8", "--out", str(b)])
    train_charlm.main(["--resume", str(b), "--steps", "12", "--stop-after", "2", "--quiet"])
    pieces = train_charlm.main(["--resume", str(b), "--quiet"])
    assert pieces["train_losses"] == whole["train_losses"]


def test_vocab_size_without_bpe_is_an_error(text_file, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, "--vocab-size", "512"])
    assert exit_info.value.code == 2 and "give it with --tokenizer bpe" in capsys.readouterr().err


def test_resume_refuses_fewer_steps_than_done(text_file, tmp_path, capsys):
    folder = tmp_path / "run"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "8", "--out", str(folder)])
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--resume", str(folder), "--steps", "6"])
    assert exit_info.value.code == 2 and "has done 8 steps already" in capsys.readouterr().err


def test_the_line_after_ctrl_c_gives_the_step_of_the_last_evaluation(text_file, tmp_path, monkeypatch, capsys):
    real_step = train_charlm.train_step

    def press_ctrl_c_during_step_6(run, x, y):
        if run.step == 5:
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(run, x, y)

    monkeypatch.setattr(train_charlm, "train_step", press_ctrl_c_during_step_6)
    metrics = train_charlm.main(["--text", str(text_file), *TINY, "--steps", "10", "--out", str(tmp_path / "r")])
    assert metrics["stopped"] == "interrupted" and metrics["step"] == 6
    out = capsys.readouterr().out
    val = re.search(r"validation: (\d\.\d\d) bits/byte .* at step (\d+) ", out)
    assert val.group(2) == "4" and float(val.group(1)) == pytest.approx(metrics["final_val_bpb"], abs=0.006)
    assert "interrupted at step 6/10" in out


def test_python_command_is_one_that_works_where_it_is_printed(monkeypatch, tmp_path):
    venv_python = tmp_path / ".venv" / "bin" / "python"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "executable", str(venv_python))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert python_command() == ".venv/bin/python"  # the project's venv, not activated
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert python_command() == str(venv_python)  # outside the project: the full path
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/sh\n")
    venv_python.chmod(0o755)
    monkeypatch.setenv("PATH", str(venv_python.parent))
    assert python_command() == "python"  # activated: python is this one


def test_the_printed_sample_command_runs_as_printed(text_file, tmp_path, capsys):
    folder = tmp_path / "run"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "3", "--out", str(folder)])
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("sample more:"))
    command = line.removeprefix("sample more:").strip()
    assert command.startswith(python_command())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # the checkout, wherever pytest runs from
    done = subprocess.run([*shlex.split(command), "--max-new-tokens", "5"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "GPT from" in done.stdout and len(done.stdout.splitlines()) >= 2

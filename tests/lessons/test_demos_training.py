"""The training demos: char-LM data and tokenizer, the train_charlm CLI (run folder, resume, Ctrl-C, bad input),
sampling from a saved run, the induction-heads and seq2seq demos.

Everything runs on tiny settings (a few seconds each); the models' own correctness
is tested in tests/models/test_models_*.py. Runs write into pytest's tmp folders, and
the docstring corpus is cached in a tmp XDG_CACHE_HOME, never in the real home.
"""

import importlib.util
import json
import os
import re
import signal
import string
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from demos import charlm_data as data
from demos import charlm_run, train_charlm
from demos._common import python_command
from models.tokenizer import CharTokenizer, TokenizerError

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def text_file(word_salad):
    return word_salad("the model reads every character and learns which one comes next in the text")


# Tiny settings: one or two layers of width 16, 16 characters of context, batches of 4.
TINY = ["--block-size", "16", "--batch-size", "4", "--n-layer", "1", "--n-head", "2", "--d-model", "16",
        "--lr", "1e-2", "--warmup-steps", "2", "--eval-every", "4", "--eval-batches", "2", "--sample-every", "6",
        "--sample-chars", "20"]


# --------------------------------------------------------------------------------------
# Data: corpus, tokenizer, batches, baseline
# --------------------------------------------------------------------------------------


def test_stdlib_corpus_is_deterministic_ascii_capped_and_cached(tmp_path):
    corpus = data.stdlib_corpus(max_bytes=20_000)
    assert len(corpus.text) == 20_000  # the standard library has far more than this: the cap applies
    assert set(corpus.text) <= set(string.printable) - set("\t\r\x0b\x0c")
    assert corpus.sha256 == data.sha256_of(corpus.text)
    assert corpus.cached_at is not None and os.path.isfile(corpus.cached_at)
    assert data.build_stdlib_corpus(20_000) == corpus.text  # built again from scratch: the same bytes
    assert data.stdlib_corpus(max_bytes=20_000).text == corpus.text  # from the cache

    # A damaged cache file is noticed (its hash no longer matches) and rebuilt.
    with open(corpus.cached_at, "w") as f:
        f.write("tampered")
    assert data.stdlib_corpus(max_bytes=20_000).text == corpus.text


@pytest.mark.parametrize("damage", ["an oversized cache file", "a deeply nested sidecar"])
def test_a_damaged_corpus_cache_is_rebuilt_not_trusted(damage):
    corpus = data.stdlib_corpus(max_bytes=5_000)
    path = Path(corpus.cached_at)
    if damage == "an oversized cache file":
        path.write_text(corpus.text * 3)  # never read whole: larger than the cap it was built with
    else:
        path.with_suffix(".json").write_text("[" * 100_000 + "]" * 100_000)
    again = data.stdlib_corpus(max_bytes=5_000)
    assert again.text == corpus.text and path.read_text() == corpus.text


def test_stdlib_walk_is_sorted_and_skips_test_folders_and_packages(tmp_path):
    for folder in ["pkg", "pkg/tests", "test", "site-packages/thing", "idlelib/idle_test", "b"]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "mod.py").write_text(f'"""Docstring of {folder}, long enough to keep."""\n')
    (tmp_path / "a.py").write_text('"""Module a.\n\nAccents: café, naïve."""\n'
                                   'def f():\n    """Function f does a thing."""\n')
    (tmp_path / "broken.py").write_text("def (:\n")  # a syntax error: skipped, not fatal
    files = [p.relative_to(tmp_path).as_posix() for p in data.stdlib_files(tmp_path)]
    assert files == ["a.py", "broken.py", "b/mod.py", "pkg/mod.py"]
    text = data.build_stdlib_corpus(root=tmp_path)
    assert text.split("\n\n") == ["Module a.", "Accents: cafe, naive.", "Function f does a thing.",
                                  "Docstring of b, long enough to keep.", "Docstring of pkg, long enough to keep."]


def test_fold_to_ascii():
    assert data.fold_to_ascii("café — naïve\tß\x07ok\n") == "cafe  naive    ok\n"


def test_tokenizer_round_trip_save_load_and_unknown_characters(tmp_path):
    tok = CharTokenizer.from_text("hello, world\n")
    assert tok.chars == sorted(set("hello, world\n"))
    ids = tok.encode("world hello")
    assert ids.dtype == np.int64 and tok.decode(ids) == "world hello"
    tok.save(tmp_path / "tokenizer.json")
    again = CharTokenizer.load(tmp_path / "tokenizer.json")
    assert again.chars == tok.chars and again.vocab_size == 10
    with pytest.raises(TokenizerError, match=r"never saw in training: 'xz'"):
        tok.encode("hex zero")


def test_batches_are_shifted_windows_from_a_seeded_generator():
    ids = np.arange(100)
    x, y = data.get_batch(ids, 8, 10, np.random.default_rng(3))
    assert x.shape == y.shape == (8, 10)
    np.testing.assert_array_equal(y, x + 1)  # the target is the next character
    np.testing.assert_array_equal(np.diff(x, axis=1), 1)  # each row is a contiguous window
    x2, _ = data.get_batch(ids, 8, 10, np.random.default_rng(3))
    np.testing.assert_array_equal(x, x2)
    train, val = data.train_val_split(ids, 0.1)
    assert len(val) == 10 and train[-1] + 1 == val[0]


def test_unigram_baseline():
    rng = np.random.default_rng(0)
    assert data.unigram_bits_per_char(rng.integers(0, 2, 20000), rng.integers(0, 2, 20000), 2) == \
        pytest.approx(1.0, abs=0.01)  # two equally frequent characters: one bit each
    assert data.unigram_bits_per_char(np.zeros(1000, int), np.zeros(100, int), 4) < 0.01


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"", "the file is empty"),
    (b"  \n\n ", "the file is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 50, "binary file"),
    (b"caf\xe9 " * 100, "not UTF-8 text"),
    (b"too short", "only 9 characters; need at least 180"),
])
def test_bad_text_files_give_one_clear_error(tmp_path, capsys, content, message):
    path = tmp_path / "input.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(path), *TINY, "--out", str(tmp_path / "run")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_device_as_text_is_one_line_error_not_read_for_ever(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", "/dev/zero", *TINY, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "is a device or socket, not a text file" in err and err.count("\n") == 1


# --------------------------------------------------------------------------------------
# train_charlm: a tiny run and its folder
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt_run(text_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "gpt"
    metrics = train_charlm.main(["--text", str(text_file), *TINY, "--steps", "16", "--out", str(folder), "--quiet"])
    return folder, metrics


def test_run_folder_holds_everything_promised(gpt_run, text_file):
    folder, metrics = gpt_run
    expected = set(charlm_run.RUN_FILES) - (set() if HAS_MATPLOTLIB else {"loss_curve.png"})
    assert expected <= {p.name for p in folder.iterdir()}
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]  # atomic writes leave nothing behind
    settings = json.loads((folder / "config.json").read_text())
    assert settings["train"]["model"] == "gpt" and settings["train"]["steps"] == 16
    assert settings["model"]["d_model"] == 16 and settings["model"]["vocab_size"] == settings["data"]["vocab_size"]
    assert settings["data"]["sha256"] == data.sha256_of(text_file.read_text())
    tok = CharTokenizer.load(folder / "tokenizer.json")
    assert tok.vocab_size == settings["data"]["vocab_size"]
    samples = (folder / "samples.txt").read_text()
    assert samples.count("=== step") == 3  # every 6 steps (6, 12) and at the end (16)
    if HAS_MATPLOTLIB:
        assert (folder / "loss_curve.png").read_bytes()[:8] == PNG_MAGIC
    saved = json.loads((folder / "metrics.json").read_text())
    assert saved["step"] == 16 and len(saved["train_losses"]) == 16
    assert [s for s, _ in saved["val_losses"]] == [4, 8, 12, 16]
    assert metrics["stopped"] == "finished"


def test_tiny_run_learns(gpt_run):
    _, metrics = gpt_run
    losses = metrics["train_losses"]
    assert np.mean(losses[-3:]) < losses[0] - 0.3
    assert metrics["val_losses"][-1][1] < metrics["val_losses"][0][1] - 0.1


def test_checkpoint_loads_into_a_fresh_model(gpt_run):
    from minigrad import io

    folder, _ = gpt_run
    settings = json.loads((folder / "config.json").read_text())
    cfg = charlm_run.TrainConfig(**settings["train"])
    model, _ = charlm_run.build_model(cfg, settings["data"]["vocab_size"], np.random.default_rng(123))
    checkpoint = io.load(folder / "checkpoint.safetensors", model)
    assert checkpoint.step == 16 and checkpoint.config == settings["model"]


def test_printed_summary_says_where_everything_is(text_file, tmp_path, capsys):
    folder = tmp_path / "run"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "4", "--out", str(folder), "--quiet"])
    out = capsys.readouterr().out
    assert "unigram baseline:" in out and "bits/byte" in out
    for name in ("checkpoint.safetensors", "config.json", "tokenizer.json", "metrics.json", "samples.txt"):
        assert str(folder / name) in out
    assert f"{python_command()} -m demos.sample {folder}" in out
    # a finished run says how to train on, and that command, as printed, does
    command = f"{python_command()} -m demos.train_charlm --resume {folder} --steps 8"
    assert f"finished 4 steps; train on with: {command}" in out
    more = train_charlm.main(command.split(" -m demos.train_charlm ")[1].split() + ["--quiet"])
    assert more["stopped"] == "finished" and more["step"] == 8


def test_steps_alone_scales_the_default_warmup():
    def warmup(*argv):
        return train_charlm.config_from_args(train_charlm.build_parser().parse_args(list(argv))).warmup_steps

    assert warmup() == 60 and warmup("--steps", "60") == 6 and warmup("--steps", "5") == 0
    assert warmup("--model", "lstm", "--steps", "100") == 10 and warmup("--model", "lstm") == 40
    assert warmup("--steps", "60", "--warmup-steps", "30") == 30  # given explicitly: kept as given


def test_steps_60_alone_runs_and_prints_losses_in_bits(text_file, tmp_path, capsys):
    """``--steps 60`` without ``--warmup-steps`` (the model is tiny, the GPT's default warmup 60 is not)."""
    at = TINY.index("--warmup-steps")
    tiny = TINY[:at] + TINY[at + 2:] + ["--eval-every", "30", "--sample-every", "0"]
    metrics = train_charlm.main(["--text", str(text_file), *tiny, "--steps", "60", "--out", str(tmp_path / "run"),
                                 "--quiet"])
    assert metrics["stopped"] == "finished" and len(metrics["train_losses"]) == 60
    out = capsys.readouterr().out
    assert "(warmup 6," in out
    evaluations = [line for line in out.splitlines() if line.startswith("step ")]
    assert len(evaluations) == 2
    for line in evaluations:  # both losses in the same unit, and said
        assert re.search(r"train loss \d+\.\d\d bits/byte .* val loss \d+\.\d\d bits/byte", line), line
    final_bpb = float(re.search(r"val loss (\d+\.\d\d) bits/byte", evaluations[-1]).group(1))
    assert final_bpb == pytest.approx(metrics["final_val_bpb"], abs=0.006)
    assert metrics["final_val_bpb"] == metrics["final_val_bits_per_token"]  # ASCII text, one token a character


def test_default_corpus_run(tmp_path, capsys):
    """No --text: the standard library's docstrings (capped small here), recorded with their hash."""
    folder = tmp_path / "run"
    train_charlm.main([*TINY, "--corpus-bytes", "5000", "--steps", "3", "--sample-every", "0",
                       "--out", str(folder), "--quiet"])
    settings = json.loads((folder / "config.json").read_text())
    assert settings["data"]["source"].startswith("stdlib docstrings")
    assert settings["data"]["characters"] == 5000
    assert settings["data"]["sha256"] == data.stdlib_corpus(5000).sha256
    assert "stdlib docstrings" in capsys.readouterr().out


@pytest.mark.parametrize("model", ["lstm", "rnn"])
def test_recurrent_models_train_and_sample(text_file, tmp_path, model):
    folder = tmp_path / model
    metrics = train_charlm.main(["--model", model, "--text", str(text_file), *TINY, "--hidden-size", "24",
                                 "--steps", "8", "--out", str(folder), "--quiet"])
    losses = metrics["train_losses"]
    assert len(losses) == 8 and np.mean(losses[-2:]) < losses[0]
    assert json.loads((folder / "config.json").read_text())["model"]["cell"] == model
    assert (folder / "samples.txt").read_text().count("=== step") == 2


# --------------------------------------------------------------------------------------
# Resume and Ctrl-C: the same losses as a run that never stopped
# --------------------------------------------------------------------------------------

# Dropout on, so the resumed runs must also restore the generator that draws the dropout masks.
RESUME = ["--steps", "10", "--dropout", "0.1", "--eval-every", "3", "--sample-every", "4"]


@pytest.fixture(scope="module")
def uninterrupted(text_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "whole"
    metrics = train_charlm.main(["--text", str(text_file), *TINY, *RESUME, "--out", str(folder), "--quiet"])
    metrics["samples"] = (folder / "samples.txt").read_text()
    return metrics


def test_stop_and_resume_gives_exactly_the_uninterrupted_losses(text_file, tmp_path, uninterrupted):
    folder = tmp_path / "pieces"
    first = train_charlm.main(["--text", str(text_file), *TINY, *RESUME, "--out", str(folder), "--quiet",
                               "--stop-after", "4"])
    assert first["stopped"] == "paused" and first["step"] == 4
    second = train_charlm.main(["--resume", str(folder), "--stop-after", "3", "--quiet"])
    assert second["step"] == 7
    final = train_charlm.main(["--resume", str(folder), "--quiet"])
    assert final["stopped"] == "finished" and final["step"] == 10
    assert final["train_losses"] == uninterrupted["train_losses"]  # exactly, not approximately
    assert final["val_losses"] == uninterrupted["val_losses"]
    assert (folder / "samples.txt").read_text() == uninterrupted["samples"]  # sampled at the same steps, same text


def test_ctrl_c_finishes_the_step_saves_and_resumes_exactly(text_file, tmp_path, monkeypatch, uninterrupted):
    real_step = train_charlm.train_step

    def press_ctrl_c_during_step_6(run, x, y):
        if run.step == 5:
            os.kill(os.getpid(), signal.SIGINT)  # a real SIGINT, handled as Ctrl-C is
        return real_step(run, x, y)

    monkeypatch.setattr(train_charlm, "train_step", press_ctrl_c_during_step_6)
    folder = tmp_path / "run"
    stopped = train_charlm.main(["--text", str(text_file), *TINY, *RESUME, "--out", str(folder), "--quiet"])
    assert stopped["stopped"] == "interrupted" and stopped["step"] == 6  # the step under way was finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the usual handler is back
    monkeypatch.undo()
    final = train_charlm.main(["--resume", str(folder), "--quiet"])
    assert final["train_losses"] == uninterrupted["train_losses"]


def test_keyboard_interrupt_inside_a_step_saves_the_step_before(text_file, tmp_path, monkeypatch, uninterrupted):
    """Without the signal handler (a KeyboardInterrupt raised mid-step), the half-done step is dropped."""
    real_step = train_charlm.train_step

    def interrupted_step(run, x, y):
        if run.step == 5:
            raise KeyboardInterrupt
        return real_step(run, x, y)

    monkeypatch.setattr(train_charlm, "train_step", interrupted_step)
    folder = tmp_path / "run"
    stopped = train_charlm.main(["--text", str(text_file), *TINY, *RESUME, "--out", str(folder), "--quiet"])
    assert stopped["stopped"] == "interrupted" and stopped["step"] == 5
    monkeypatch.undo()
    final = train_charlm.main(["--resume", str(folder), "--quiet"])
    assert final["train_losses"] == uninterrupted["train_losses"]


def test_interrupt_during_the_weight_update_saves_nothing(text_file, tmp_path, monkeypatch, capsys):
    from minigrad import optim

    real_step, calls = optim.AdamW.step, []

    def step_interrupted_on_the_sixth_call(self, closure=None):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt  # half-way through an update: the weights in memory are not worth saving
        return real_step(self, closure)

    monkeypatch.setattr(optim.AdamW, "step", step_interrupted_on_the_sixth_call)
    folder = tmp_path / "run"
    result = train_charlm.main(["--text", str(text_file), *TINY, *RESUME, "--out", str(folder), "--quiet"])
    assert result["stopped"] == "aborted" and result["step"] == 5
    assert io_step(folder / "checkpoint.safetensors") == 3  # the checkpoint of the last evaluation, untouched
    assert "nothing saved" in capsys.readouterr().out


def io_step(path) -> int:
    from minigrad import io

    return io.load(path).step


@pytest.mark.parametrize("make_args, message", [
    (lambda run, text: ["--resume", str(run.parent / "nowhere")], "no config.json there"),
    (lambda run, text: ["--resume", str(run), "--lr", "0.1"], "drop --lr"),
    (lambda run, text: ["--text", str(text), *TINY, "--out", str(run)], "already holds a run"),
    (lambda run, text: ["--text", str(text), *TINY, "--n-head", "3", "--out", str(run.parent / "x")],
     "d_model=16 must be divisible by n_head=3"),
    (lambda run, text: ["--text", str(text), *TINY, "--warmup-steps", "50", "--steps", "10"],
     "--warmup-steps must be at least 0 and less than --steps 10, got 50"),
])
def test_bad_runs_give_one_clear_error(gpt_run, text_file, capsys, make_args, message):
    folder, _ = gpt_run
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(make_args(folder, text_file))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_resume_refuses_a_changed_text(text_file, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text(text_file.read_text())
    folder = tmp_path / "run"
    train_charlm.main(["--text", str(text), *TINY, "--steps", "4", "--stop-after", "2", "--out", str(folder),
                       "--quiet"])
    text.write_text(text_file.read_text().upper())
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--resume", str(folder), "--quiet"])
    assert exit_info.value.code == 2 and "training text has changed" in capsys.readouterr().err


def test_damaged_checkpoint_is_a_clear_error(text_file, tmp_path, capsys):
    folder = tmp_path / "run"
    train_charlm.main(["--text", str(text_file), *TINY, "--steps", "4", "--stop-after", "2", "--out", str(folder),
                       "--quiet"])
    checkpoint = folder / "checkpoint.safetensors"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-100])
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--resume", str(folder), "--quiet"])
    assert exit_info.value.code == 2 and "checkpoint.safetensors" in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# demos.sample
# --------------------------------------------------------------------------------------


def test_sample_continues_the_prompt_reproducibly(gpt_run, capsys):
    from demos import sample

    folder, _ = gpt_run
    args = [str(folder), "--prompt", "the model", "--max-new-tokens", "30", "--seed", "5", "--top-k", "5"]
    first = sample.main(args)
    assert len(first) == 1 and first[0].startswith("the model") and len(first[0]) == len("the model") + 30
    assert sample.main(args) == first  # the same seed, the same text
    assert sample.main([*args, "--no-cache"]) == first  # the KV cache changes the cost, not the result
    greedy = sample.main([str(folder), "--prompt", "the", "--temperature", "0", "--num-samples", "2",
                          "--max-new-tokens", "10"])
    assert greedy[0] == greedy[1]  # greedy decoding has nothing random in it
    assert "KV cache" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--prompt", "über"], "never saw in training"),
    (["--top-p", "1.5"], "--top-p in (0, 1]"),
])
def test_sample_bad_input(gpt_run, capsys, extra, message):
    from demos import sample

    folder, _ = gpt_run
    with pytest.raises(SystemExit) as exit_info:
        sample.main([str(folder), *extra])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


# --------------------------------------------------------------------------------------
# Induction heads and seq2seq
# --------------------------------------------------------------------------------------


def test_induction_scores_recognise_the_patterns():
    from demos import induction_heads as ih

    T, half = 12, 6
    induction = np.zeros((1, 2, T, T))
    previous = np.zeros((1, 2, T, T))
    for t in range(T):
        previous[0, :, t, max(t - 1, 0)] = 1.0
        induction[0, :, t, t - half + 1 if t >= half else 0] = 1.0
    np.testing.assert_allclose(ih.induction_scores(induction), [1.0, 1.0])
    np.testing.assert_allclose(ih.previous_token_scores(previous), [1.0, 1.0])
    assert ih.induction_scores(previous).max() == 0.0
    seq = ih.repeated_sequences(3, half, 10, np.random.default_rng(0))
    np.testing.assert_array_equal(seq[:, :half], seq[:, half:])


def test_loss_by_half_splits_the_positions():
    import minigrad as mg
    from demos import induction_heads as ih

    seq = np.array([[0, 1, 2, 3, 0, 1, 2, 3]])  # half = 4
    logits = np.zeros((1, 8, 4), dtype=np.float32)
    logits[0, 4:, :] = -20.0  # positions 4..7 predict their targets (tokens at 5..8) near perfectly
    for t in range(4, 7):
        logits[0, t, seq[0, t + 1]] = 20.0
    _, first, repeated = ih.loss_by_half(mg.Tensor(logits), seq)
    assert first == pytest.approx(np.log(4), rel=1e-5)  # uniform guesses on the random half
    assert repeated < 1e-6


def test_induction_heads_demo_runs(tmp_path, capsys):
    from demos import induction_heads

    result = induction_heads.main(["--steps", "40", "--half", "6", "--vocab-size", "8", "--d-model", "16",
                                   "--eval-every", "10", "--out", str(tmp_path)])
    history = result["history"]
    assert history["step"] == [0, 10, 20, 30, 40]
    assert all(0.0 <= s <= 1.0 for s in history["induction"])
    assert history["repeated"][-1] < history["repeated"][0]  # something about the copy is learned already
    out = capsys.readouterr().out
    assert "induction head: layer 2, head" in out and "nats per token" in out
    if HAS_MATPLOTLIB:
        assert (tmp_path / "induction_heads.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("task, answer", [("reverse", (9, 5, 1, 4, 1, 3)), ("sort", (1, 1, 3, 4, 5, 9))])
def test_seq2seq_batches(task, answer):
    from demos import seq2seq

    src, tgt_in, tgt_out = seq2seq.make_batch([(3, 1, 4, 1, 5, 9), (2, 7, 1)], task, max_len=8)
    assert src.shape == (2, 8) and tgt_in.shape == tgt_out.shape == (2, 9)
    assert seq2seq.tokens_to_text(src[0]) == "3 1 4 1 5 9"
    assert seq2seq.tokens_to_text(tgt_in[0]) == "<bos> " + " ".join(map(str, answer))
    assert seq2seq.tokens_to_text(tgt_out[0]) == " ".join(map(str, answer)) + " <eos>"
    assert (tgt_out[1, 4:] == seq2seq.PAD).all()  # padding after <eos> (ignored by the loss)


def test_seq2seq_held_out_strings_never_appear_in_training():
    from demos import seq2seq

    test = set(seq2seq.random_strings(200, 1, 2, np.random.default_rng(0)))
    train = seq2seq.random_strings(300, 1, 2, np.random.default_rng(1), exclude=frozenset(test))
    assert not test & set(train)


def test_seq2seq_demo_runs(tmp_path, capsys):
    from demos import seq2seq

    result = seq2seq.main(["--steps", "30", "--batch-size", "16", "--max-len", "5", "--d-model", "16",
                           "--n-layer", "1", "--test-size", "40", "--eval-every", "10", "--lr", "5e-3",
                           "--out", str(tmp_path)])
    assert 0.0 <= result["accuracy"] <= 1.0 and set(result["by_length"]) <= {3, 4, 5}
    assert np.mean(result["losses"][-5:]) < result["losses"][0] - 0.3
    out = capsys.readouterr().out
    assert "exact match on 40 held-out strings" in out and "nats per output token" in out
    if HAS_MATPLOTLIB:
        assert (tmp_path / "seq2seq_cross_attention.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("extra, message", [
    (["--temperature", "inf"], "finite --temperature"),
    (["--temperature", "nan"], "finite --temperature"),
])
def test_sample_non_finite_temperature_is_one_line_error(gpt_run, capsys, extra, message):
    from demos import sample

    folder, _ = gpt_run
    with pytest.raises(SystemExit) as exit_info:
        sample.main([str(folder), *extra])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and err.count("\n") == 1


# --------------------------------------------------------------------------------------
# One-line errors, never a traceback; nothing overwritten
# --------------------------------------------------------------------------------------


def test_out_an_existing_file_is_one_line_error_and_the_file_is_kept(text_file, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, "--out", str(target)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "is a file, not a folder" in err and err.count("\n") == 1
    assert target.read_text() == "mine"


def test_out_a_folder_with_a_runs_file_names_is_refused_before_writing(text_file, tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "samples.txt").write_text("my own notes")
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, "--out", str(folder)])
    assert exit_info.value.code == 2 and "already has samples.txt" in capsys.readouterr().err
    assert [p.name for p in folder.iterdir()] == ["samples.txt"] and (folder / "samples.txt").read_text() == \
        "my own notes"


@pytest.mark.parametrize("value", ["0", "abc", "-2", "\u00b2"])  # (a superscript 2: a digit to str.isdigit)
def test_a_bad_minigrad_threads_is_one_line_error(text_file, tmp_path, monkeypatch, capsys, value):
    from demos._common import parse_args

    monkeypatch.setenv("MINIGRAD_THREADS", value)
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("python -m demos.train_charlm: error: MINIGRAD_THREADS")
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    with pytest.raises(SystemExit) as exit_info:  # the lessons' own command line, the same way
        parse_args([], "induction_heads", "a lesson")
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("python -m demos.induction_heads: error: MINIGRAD_THREADS")
    done = subprocess.run([sys.executable, "-m", "demos.seq2seq"], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2], env={**os.environ, "MINIGRAD_THREADS": value})
    assert done.returncode == 2 and done.stderr.startswith("python -m demos.seq2seq: error: MINIGRAD_THREADS")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("option", ["--temperature", "--lr", "--grad-clip"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_non_finite_setting_is_one_line_error(text_file, tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, option, value, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"{option} must be" in err and err.count("\n") == 1


def test_a_demo_under_an_interpreter_without_the_dependencies_says_which_to_use():
    """``python -m demos.quickstart`` with the system's Python: one line naming .venv/bin/python, no traceback.
    (``-S``: this interpreter without its site-packages, so numpy and the rest are missing.)"""
    done = subprocess.run([sys.executable, "-S", "-m", "demos.quickstart"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "lacks minigrad's dependencies" in done.stderr and ".venv/bin/python -m demos.quickstart" in done.stderr


# --------------------------------------------------------------------------------------
# A damaged run folder: the loader's own one-line error, before anything is allocated
# --------------------------------------------------------------------------------------


def damage(folder, name, edit):
    path = folder / name
    path.write_text(edit(path.read_text()))


def edit_setting(key, value):
    def edit(text):
        settings = json.loads(text)
        settings["train"][key] = value
        return json.dumps(settings)
    return edit


DOUBLING_MERGES = json.dumps({"type": "bpe", "version": 1, "pretokenizer": "gpt2", "special_tokens": {"<e>": 296},
                              "merges": [[97, 97]] + [[256 + i, 256 + i] for i in range(39)]})


@pytest.mark.parametrize("name, edit, message", [
    ("config.json", edit_setting("d_model", 1_000_000), "cannot hold the GPT the settings describe"),
    ("config.json", edit_setting("n_layer", "2"), "setting 'n_layer' is '2'; it must be a finite int"),
    ("config.json", edit_setting("lr", None), "setting 'lr' is None"),
    ("config.json", edit_setting("block_size", 0), "--block-size must be at least 1"),
    ("config.json", edit_setting("surprise", 1), "unknown settings ['surprise']"),
    ("config.json", lambda text: "[" * 100_000 + "]" * 100_000, "not a run's settings (RecursionError"),
    ("config.json", lambda text: "[]", "not a run's settings"),
    ("tokenizer.json", lambda text: DOUBLING_MERGES, "spell tokens of 2,199,023,255,806 bytes"),
    ("tokenizer.json", lambda text: '{"type": "char", "chars": [1, 2]}', "distinct single characters"),
])
@pytest.mark.parametrize("command", ["sample", "resume", "export"])
def test_a_damaged_run_folder_is_one_line_error_from_every_command(gpt_run, tmp_path, capsys, name, edit, message,
                                                                   command):
    import shutil

    from demos import continue_in_pytorch, sample

    folder = tmp_path / "damaged"
    shutil.copytree(gpt_run[0], folder)
    damage(folder, name, edit)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    run = {"sample": lambda: sample.main([str(folder)]),
           "resume": lambda: train_charlm.main(["--resume", str(folder), "--steps", "20", "--quiet"]),
           "export": lambda: continue_in_pytorch.main(["export", str(folder)])}[command]
    with pytest.raises(SystemExit) as exit_info:
        run()
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and err.count("\n") == 1, err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing written


def test_settings_too_large_for_memory_are_one_line_error(text_file, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--text", str(text_file), *TINY, "--batch-size", str(10**13), "--out",
                           str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "ran out of memory at step 1" in err and err.count("\n") == 1


@pytest.mark.parametrize("extra, message", [
    (["--num-samples", str(10**13)], "not enough memory for 10,000,000,000,000 samples"),
    (["--seed", "-1"], "--seed must be >= 0"),
])
def test_sample_huge_or_negative_requests_are_one_line_error(gpt_run, capsys, extra, message):
    from demos import sample

    with pytest.raises(SystemExit) as exit_info:
        sample.main([str(gpt_run[0]), "--max-new-tokens", "2", *extra])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and message in err and err.count("\n") == 1


def test_a_checkpoint_whose_losses_are_not_numbers_is_one_line_error(gpt_run, tmp_path, capsys):
    """A checkpoint with a matching checksum but an ``extra`` the demo did not write (losses that are strings)."""
    import shutil

    from minigrad import io

    folder = tmp_path / "run"
    shutil.copytree(gpt_run[0], folder)
    path = folder / "checkpoint.safetensors"
    tensors, meta = io.load_safetensors(path, return_metadata=True)
    meta["extra"] = json.dumps({"train_losses": ["low"], "val_losses": [], "seconds": 1.0})
    meta["sha256"] = io._checksum(tensors, {k: v for k, v in meta.items() if k != "sha256"})
    io.save_safetensors(path, tensors, meta)
    with pytest.raises(SystemExit) as exit_info:
        train_charlm.main(["--resume", str(folder), "--steps", "20", "--quiet"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "losses and seconds are missing or not numbers" in err


def test_the_demos_print_a_thread_measurement_only_when_it_changes_the_count(capsys):
    from demos._common import say_when_the_count_changes
    from minigrad.kernels import policy

    cost = {1: 1.0, 2: 2.0}  # seconds per step on each count: one thread is quicker
    now = [0.0]

    def clock():
        now[0] += cost[tuner.current]
        return now[0]

    tuner = policy.ThreadTuner([1, 2], "2 cores", trial=1, recheck=1, clock=clock, apply=lambda n: None)
    tuner.say = say_when_the_count_changes(tuner)

    def measure():
        while True:
            was = len(tuner.history)
            tuner.tick()
            if len(tuner.history) > was:
                return

    measure()  # the first measurement: said
    measure()  # measured again (recheck=1: after one step), the same count: nothing said
    cost.update({1: 3.0})
    measure()  # now two threads are quicker: said
    lines = capsys.readouterr().out.splitlines()
    assert len(tuner.history) == 3
    assert lines == [f"threads: {tuner.history[0]}", f"threads: {tuner.history[2]}"]
    assert "auto: 1 measured quickest" in lines[0] and "auto: 2 measured quickest" in lines[1]

"""monoflow.train: the train tool's contracts in-process (resume, the run directory's lock,
config errors, SIGINT stopping with a checkpoint)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import monoflow


def test_trains_then_resumes(tiny_config, tmp_path):
    first = monoflow.train(tiny_config, quiet=True)
    assert (first.step, first.stop_reason, first.interrupted) == (3, "max_steps", False)
    assert first.checkpoint == str(tmp_path / "run" / "checkpoints" / "ckpt_000000003.pt")
    assert os.path.exists(first.checkpoint)
    more = monoflow.train(tiny_config, ["train.max_steps=4"], resume=True, quiet=True)
    assert more.step == 4 and more.checkpoint.endswith("ckpt_000000004.pt")
    # flags that stand for config keys, as the tool's: max_steps wins over --set
    again = monoflow.train(tiny_config, ["train.max_steps=100"], resume=True, max_steps=5, quiet=True)
    assert again.step == 5


def test_a_fresh_run_does_not_overwrite_a_run(tiny_config, tmp_path):
    monoflow.train(tiny_config, quiet=True)
    with pytest.raises(monoflow.FileError) as e:
        monoflow.train(tiny_config, quiet=True)
    assert str(tmp_path / "run") in str(e.value) and "--resume" in str(e.value)


def test_config_errors_name_the_key_and_line(tiny_config):
    with pytest.raises(monoflow.UserError, match=r"unknown key 'train\.batchsize' \(did you mean 'train\.batch_size'\?\)"):
        monoflow.train(tiny_config, ["train.batchsize=3"])
    with pytest.raises(monoflow.UserError, match=r"--max-steps: must be a whole number >= 1, got 0"):
        monoflow.train(tiny_config, max_steps=0)
    # an OptionError of the data library, with its key and problem as attributes
    with pytest.raises(monoflow.OptionError) as e:
        monoflow.train(tiny_config, ["data.validation_size=10"], quiet=True)
    assert e.value.key == "data.validation_size" and str(e.value) == f"data.validation_size: {e.value.problem}"
    assert "held-out utterances leave none of the 10 usable lines" in e.value.problem
    with open(tiny_config) as f:
        text = f.read()
    with open(tiny_config, "w") as f:
        f.write(text.replace("batch_size: 4", "batch_size: 0"))
    with pytest.raises(monoflow.UserError, match=f"{tiny_config}:3: train.batch_size: must be > 0"):
        monoflow.train(tiny_config)


def test_sigint_stops_with_a_checkpoint_and_raises_keyboard_interrupt(tiny_config, tmp_path):
    script = textwrap.dedent(f"""
        import monoflow, sys
        try:
            monoflow.train({tiny_config!r}, ["train.max_steps=100000", "train.checkpoint_interval=100000"], quiet=True)
        except KeyboardInterrupt as e:
            print("KeyboardInterrupt:", e, flush=True)
            sys.exit(7)
        print("finished", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 120
    while not (metrics.exists() and metrics.stat().st_size > 0) and time.time() < deadline and child.poll() is None:
        time.sleep(0.2)  # until the first logged step: the loop runs
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 7, err
    assert "training stopped by SIGINT at step" in out and "monoflow.train(..., resume=True) continues" in out
    checkpoints = sorted(os.listdir(tmp_path / "run" / "checkpoints"))
    assert checkpoints and checkpoints[-1] in out
    # and Python's own handler is back afterwards: a second Ctrl-C is a KeyboardInterrupt again
    after = textwrap.dedent(f"""
        import monoflow, os, signal, time
        monoflow.train({tiny_config!r}, ["train.max_steps=1"], force_new=True, quiet=True)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            print("python handler", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", after], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "python handler" in done.stdout, done.stderr


def test_sigterm_stops_with_a_checkpoint_and_returns_the_summary(tiny_config, tmp_path):
    script = textwrap.dedent(f"""
        import monoflow
        s = monoflow.train({tiny_config!r}, ["train.max_steps=100000", "train.checkpoint_interval=100000"], quiet=True)
        print("returned", s.interrupted, s.signal, s.stop_reason, s.step, s.checkpoint, flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.time() + 120
    while not (metrics.exists() and metrics.stat().st_size > 0) and time.time() < deadline and child.poll() is None:
        time.sleep(0.2)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    returned, interrupted, signal_number, reason, step, checkpoint = out.split()
    assert (returned, interrupted, signal_number, reason) == ("returned", "True", "15", "signal")
    assert checkpoint.endswith(f"ckpt_{int(step):09d}.pt") and os.path.exists(checkpoint)

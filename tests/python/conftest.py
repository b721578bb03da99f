"""Fixtures of the Python API tests: a tiny LJSpeech-layout corpus of tones (as
tests/train/tiny_corpus.h writes it), a tiny model config, and a checkpoint trained from it in
this process with monoflow.train. ctest runs these with PYTHONPATH=<build>/python (the module as
built) and MONOFLOW_BIN_DIR=<build>/bin (the tools, to compare against)."""

import math
import os
import struct
import wave

import pytest

import monoflow

TEXTS = ["hello world.", "a quick test.", "tiny corpus.", "glow is a flow.", "one two three.",
         "monotonic path.", "speech model.", "short line.", "align me now.", "last one here."]
RATE = 22050
HOP = 256


def write_tiny_corpus(folder):
    """Ten utterances, 40 ms of tone per character with the pitch from the letter."""
    os.makedirs(os.path.join(folder, "wavs"), exist_ok=True)
    lines = []
    for i, text in enumerate(TEXTS):
        uid = f"TINY-{100 + i}"
        lines.append(f"{uid}|{text}|{text}\n")
        per_char = RATE // 25
        samples = []
        for c, ch in enumerate(text):
            f = 150.0 + 12.0 * (ord(ch) % 32)
            for k in range(per_char):
                t = (c * per_char + k) / RATE
                samples.append(0.3 * math.sin(2 * math.pi * f * t) + 0.1 * math.sin(4 * math.pi * f * t))
        with wave.open(os.path.join(folder, "wavs", uid + ".wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(b"".join(struct.pack("<h", round(s * 32767)) for s in samples))
    with open(os.path.join(folder, "metadata.csv"), "w") as f:
        f.writelines(lines)


def tiny_config_yaml(corpus, run_dir, max_steps):
    return f"""train:
  seed: 1234
  batch_size: 4
  learning_rate: 1.0
  warmup_steps: 20
  log_interval: 1
  val_interval: 3
  checkpoint_interval: 3
  max_steps: {max_steps}
  fp16_run: false
  use_cuda: false
  keep_checkpoints: 3
data:
  dataset_dir: {corpus}
  validation_size: 2
  num_workers: 2
  max_mel_frames: 400
  cache_dir: {corpus}/cache
model:
  hidden_channels: 16
  filter_channels: 32
  filter_channels_dp: 16
  n_blocks_dec: 2
  n_layers_enc: 1
  n_heads: 2
  hidden_channels_enc: 16
  hidden_channels_dec: 16
  n_block_layers: 2
run:
  dir: {run_dir}
  device: cpu
  align_backend: cpu
"""


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("corpus"))
    write_tiny_corpus(folder)
    return folder


@pytest.fixture
def tiny_config(corpus, tmp_path):
    """A config file of the tiny model whose run directory is this test's own."""
    path = tmp_path / "tiny.yaml"
    path.write_text(tiny_config_yaml(corpus, str(tmp_path / "run"), 3))
    return str(path)


@pytest.fixture(scope="session")
def checkpoint(corpus, tmp_path_factory):
    """A checkpoint of the tiny model after 3 steps, trained by monoflow.train."""
    folder = tmp_path_factory.mktemp("trained")
    config = folder / "tiny.yaml"
    config.write_text(tiny_config_yaml(corpus, str(folder / "run"), 3))
    summary = monoflow.train(str(config), quiet=True)
    assert summary.step == 3 and summary.stop_reason == "max_steps"
    return summary.checkpoint


@pytest.fixture(scope="session")
def tool():
    """The path of a monoflow tool of this build."""
    bin_dir = os.environ.get("MONOFLOW_BIN_DIR")
    if not bin_dir:
        pytest.skip("MONOFLOW_BIN_DIR is not set (ctest sets it to the build's bin/)")
    return lambda name: os.path.join(bin_dir, name)

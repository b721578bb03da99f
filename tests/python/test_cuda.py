"""The Python API on a GPU (skipped without one): synthesis on CUDA gives the CPU's mel, and a
training runs there in-process and resumes."""

import pytest
import torch

import monoflow

from conftest import tiny_config_yaml

TEXT = "Hello there, tiny model."

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
def test_mel_on_the_gpu_is_the_cpus_within_float_rounding(checkpoint):
    torch.backends.cuda.matmul.allow_tf32 = False
    cpu = monoflow.Synthesizer(checkpoint).mel(TEXT)
    gpu = monoflow.Synthesizer(checkpoint, device="cuda").mel(TEXT)
    assert gpu.dtype == torch.float32  # on the host, where the vocoder takes it, as on the CPU
    assert gpu.shape == cpu.shape
    # summation order only (the C++ suite's tolerance for CPU against GPU, TF32 off there too)
    assert (gpu.cpu() - cpu).abs().max().item() <= 1e-4 * cpu.abs().max().item() + 1e-3


@needs_cuda
def test_train_runs_on_the_gpu_and_resumes(corpus, tmp_path):
    config = tmp_path / "gpu.yaml"
    yaml = tiny_config_yaml(corpus, str(tmp_path / "run"), 3)
    config.write_text(yaml.replace("use_cuda: false", "use_cuda: true").replace("device: cpu", "device: cuda")
                      .replace("align_backend: cpu", "align_backend: cuda"))
    first = monoflow.train(str(config), quiet=True)
    assert first.step == 3 and first.stop_reason == "max_steps"
    resumed = monoflow.train(str(config), ["train.max_steps=6"], resume=True, quiet=True)
    assert resumed.step == 6 and resumed.checkpoint != first.checkpoint

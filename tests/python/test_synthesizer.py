"""monoflow.Synthesizer against the synthesize tool on the same checkpoint and text."""

import subprocess
import wave

import numpy as np
import pytest
import torch

import monoflow

TEXT = "Hello there, tiny model."


def test_mel_is_the_synthesize_tools_mel(checkpoint, tool, tmp_path):
    mel_npy, wav = tmp_path / "mel.npy", tmp_path / "out.wav"
    subprocess.run([tool("synthesize"), "--checkpoint", checkpoint, "--text", TEXT, "--device", "cpu",
                    "-o", str(wav), "--mel-out", str(mel_npy)], check=True, capture_output=True)
    mel = monoflow.Synthesizer(checkpoint).mel(TEXT)
    assert isinstance(mel, torch.Tensor) and mel.dtype == torch.float32
    expected = torch.from_numpy(np.load(mel_npy))
    assert mel.shape == expected.shape and mel.shape[0] == 80
    assert torch.equal(mel, expected)


def test_tts_gives_the_tools_waveform_and_rate(checkpoint, tool, tmp_path):
    wav = tmp_path / "out.wav"
    subprocess.run([tool("synthesize"), "--checkpoint", checkpoint, "--text", TEXT, "--device", "cpu",
                    "-o", str(wav)], check=True, capture_output=True)
    voice = monoflow.Synthesizer(checkpoint)
    audio, rate = voice.tts(TEXT)
    assert rate == 22050 and audio.dim() == 1 and audio.dtype == torch.float32
    frames = voice.mel(TEXT).shape[1]
    assert audio.numel() == (frames - 1) * 256  # Griffin-Lim's inverse STFT, centred frames
    with wave.open(str(wav)) as w:
        assert w.getframerate() == rate
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    # the tool's wav is this waveform as 16-bit PCM (train/wav.cpp: clamp, x32767, round)
    assert np.array_equal(pcm, np.round(np.clip(audio.numpy(), -1, 1) * 32767).astype(np.int16))


def test_results_are_the_library_tensors_not_copies(checkpoint):
    r = monoflow.Synthesizer(checkpoint).synthesize(TEXT)
    assert r.mel.data_ptr() == r.mel.data_ptr()
    r.mel[0, 0] = 123.0  # writes the at::Tensor the result holds
    assert r.mel[0, 0].item() == 123.0
    assert r.alignment.shape == (r.alignment.shape[0], r.mel.shape[1])
    assert r.audio.numel() == (r.mel.shape[1] - 1) * 256 and r.sample_rate == 22050 and r.step == 3


def test_errors_carry_the_librarys_messages(checkpoint, tmp_path):
    missing = str(tmp_path / "missing.pt")
    with pytest.raises(monoflow.FileError) as e:
        monoflow.Synthesizer(missing)
    assert missing in str(e.value) and e.value.file == missing
    voice = monoflow.Synthesizer(checkpoint)
    with pytest.raises(monoflow.UserError, match=r"text '\.\.\. !': nothing to say"):
        voice.tts("... !")
    with pytest.raises(monoflow.UserError, match="is a single-speaker model"):
        voice.mel(TEXT, speaker=2)
    with pytest.raises(monoflow.UserError, match="--length-scale"):
        monoflow.Synthesizer(checkpoint, length_scale=0)
    with pytest.raises(monoflow.UserError, match=r"^--set: data\.sampling_rate: must be > 0, got -5$"):
        monoflow.Synthesizer(checkpoint, overrides=["data.sampling_rate=-5"])


@pytest.fixture(scope="module")
def two_speakers(corpus, tmp_path_factory):
    """A tiny model of two speakers (a filelist path|speaker|text over the tiny corpus)."""
    from conftest import TEXTS, tiny_config_yaml

    folder = tmp_path_factory.mktemp("speakers")
    filelist = folder / "list.txt"
    filelist.write_text("".join(f"wavs/TINY-{100 + i}.wav|{i % 2}|{t}\n" for i, t in enumerate(TEXTS)))
    config = folder / "tiny.yaml"
    config.write_text(tiny_config_yaml(corpus, str(folder / "run"), 3))
    return monoflow.train(str(config), [f"data.training_files={filelist}", "data.n_speakers=2",
                                        "model.gin_channels=8"], quiet=True).checkpoint


def test_a_speaker_per_call_or_at_construction(two_speakers):
    voice = monoflow.Synthesizer(two_speakers)  # no speaker yet: each call gives one
    zero, one = voice.mel(TEXT, speaker=0), voice.mel(TEXT, speaker=1)
    assert not torch.equal(zero, one)
    assert torch.equal(monoflow.Synthesizer(two_speakers, speaker=1).mel(TEXT), one)
    assert torch.equal(monoflow.Synthesizer(two_speakers, speaker=1).mel(TEXT, speaker=0), zero)
    with pytest.raises(monoflow.UserError, match=r"is a model of 2 speakers: give --speaker 0\.\.1$"):
        voice.tts(TEXT)
    with pytest.raises(monoflow.UserError, match=r"give --speaker 0\.\.1 \(got 2\)"):
        voice.tts(TEXT, speaker=2)
    with pytest.raises(monoflow.UserError, match=r"\(got 5\)"):
        monoflow.Synthesizer(two_speakers, speaker=5)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_a_libtorch_error_is_a_runtime_error_without_the_cpp_backtrace(checkpoint, tmp_path):
    class Broken(torch.nn.Module):
        def forward(self, mel: torch.Tensor) -> torch.Tensor:
            return torch.ones(2) + torch.ones(3)

    vocoder = str(tmp_path / "broken.ts")
    torch.jit.script(Broken()).save(vocoder)
    with pytest.raises(RuntimeError) as e:
        monoflow.Synthesizer(checkpoint, vocoder=vocoder).tts(TEXT)
    assert not isinstance(e.value, monoflow.UserError)
    assert "The size of tensor a (2) must match the size of tensor b (3)" in str(e.value)
    assert "Exception raised from" not in str(e.value)  # c10's C++ backtrace, which the tools do not print either


def test_threads_may_share_a_synthesizer(checkpoint):
    """Mels and waveforms asked for at once from one object: each call gets what it asked for
    (without the lock a mel-only call could switch the vocoder off under a tts call)."""
    import threading

    voice = monoflow.Synthesizer(checkpoint)
    alone = voice.mel(TEXT)
    mels, results = [], []
    threads = [threading.Thread(target=lambda: mels.append(voice.mel(TEXT))) for _ in range(4)]
    threads += [threading.Thread(target=lambda: results.append(voice.synthesize(TEXT))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(mels) == 4 and all(torch.equal(m, alone) for m in mels)
    assert len(results) == 4
    for r in results:
        assert torch.equal(r.mel, alone) and r.audio.numel() == (alone.shape[1] - 1) * 256

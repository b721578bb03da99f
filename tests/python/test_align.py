"""monoflow.align: durations per utterance, as the align tool writes them."""

import os
import subprocess
import wave

import numpy as np
import pytest
import torch

import monoflow
from conftest import HOP, TEXTS


def test_durations_sum_to_each_mel_length(checkpoint, corpus):
    result = monoflow.align(checkpoint, dataset_dir=corpus)
    assert result.utterances == len(TEXTS) and result.bad_lines == 0 and result.out_dir == ""
    assert sorted(result.durations) == [f"TINY-{100 + i}" for i in range(len(TEXTS))]
    for uid, durations in result.durations.items():
        with wave.open(os.path.join(corpus, "wavs", uid + ".wav")) as w:
            frames = 1 + w.getnframes() // HOP  # the recipe's frame count (aligner.h)
        assert durations.dtype == torch.int64 and int(durations.sum()) == frames
        assert len(result.tokens[uid]) == durations.numel()


@pytest.mark.parametrize("junction", [None, "next", "middle"])  # None: each one's default
def test_durations_and_textgrids_are_the_align_tools(checkpoint, corpus, tool, tmp_path, junction):
    out = tmp_path / "tool"
    chosen = [] if junction is None else ["--junction", junction]
    subprocess.run([tool("align"), "--checkpoint", checkpoint, "--dataset-dir", corpus, "--out", str(out),
                    "--device", "cpu", "-q"] + chosen, check=True, capture_output=True)
    kwargs = {} if junction is None else {"junction": junction}
    mine = monoflow.align(checkpoint, dataset_dir=corpus, out_dir=str(tmp_path / "api"), **kwargs)
    assert mine.summary_path == str(tmp_path / "api" / "summary.tsv") and os.path.exists(mine.summary_path)
    for uid, durations in mine.durations.items():
        expected = np.load(out / "durations" / (uid + ".npy"))
        assert np.array_equal(durations.numpy(), expected.astype(np.int64))
        grid = (out / "textgrids" / (uid + ".TextGrid")).read_text()
        assert (tmp_path / "api" / "textgrids" / (uid + ".TextGrid")).read_text() == grid


def test_a_bad_line_names_its_file_and_line(checkpoint, corpus, tmp_path):
    filelist = tmp_path / "list.txt"
    filelist.write_text(f"wavs/TINY-100.wav|hello world.\nwavs/none.wav|missing audio.\n")
    with pytest.raises(monoflow.FileError) as e:
        monoflow.align(checkpoint, dataset_dir=corpus, filelist=str(filelist), overrides=["data.on_bad_line=error"])
    assert f"{filelist}:2" in str(e.value)
    with pytest.raises(monoflow.UserError, match="junction: 'late': give one of 'middle', 'next', 'centre'"):
        monoflow.align(checkpoint, dataset_dir=corpus, junction="late")

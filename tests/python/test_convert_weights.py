"""monoflow.convert_weights: monoflow -> official -> monoflow, the weights unchanged."""

import pytest
import torch

import monoflow


def test_round_trip_keeps_every_tensor(checkpoint, tmp_path):
    ours = monoflow.load_weights(checkpoint)
    official = str(tmp_path / "G_3.pth")
    out = monoflow.convert_weights(checkpoint, official, to_official=True, checkpoint=True)
    assert out.step == 3 and out.iteration >= 1 and out.wrote.startswith("wrote " + official)
    saved = torch.load(official, weights_only=True)
    assert saved["iteration"] == out.iteration and set(saved) == {"model", "iteration", "learning_rate"}
    back = str(tmp_path / "back.pt")
    checked = monoflow.convert_weights(official, back)
    assert checked.tensors == len(saved["model"]) and checked.parameters == out.parameters
    assert checked.summary.startswith(official + ": ")
    again = torch.load(back, weights_only=True)
    for name in (saved["model"], again, monoflow.load_weights(official)):
        assert list(name) == list(saved["model"])
    assert set(ours) == set(again)
    for key, tensor in ours.items():
        assert torch.equal(tensor, again[key]), key
        assert torch.equal(tensor, saved["model"][key]), key
    assert [k for k, _ in checked.keys] == list(ours)


def test_wrong_direction_names_the_file_and_the_command(checkpoint, tmp_path):
    with pytest.raises(monoflow.FileError) as e:
        monoflow.convert_weights(checkpoint)
    assert e.value.file == checkpoint and f"--to-official {checkpoint} OUT.pth" in str(e.value)
    official = str(tmp_path / "G.pth")
    monoflow.convert_weights(checkpoint, official, to_official=True)
    with pytest.raises(monoflow.FileError, match="is a Python torch.save file"):
        monoflow.convert_weights(official, str(tmp_path / "x.pth"), to_official=True)
    with pytest.raises(monoflow.UserError, match="--to-official needs OUT"):
        monoflow.convert_weights(checkpoint, to_official=True)

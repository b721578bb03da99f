"""Stand-in for librosa under load_mel_from_disk (see ../README.md): NaN arrays, right shapes."""
from . import filters, util  # noqa: F401


def stft(*args, **kwargs):
    raise RuntimeError("parity shim: librosa.stft is not available (mels come from disk)")


def istft(*args, **kwargs):
    raise RuntimeError("parity shim: librosa.istft is not available (mels come from disk)")

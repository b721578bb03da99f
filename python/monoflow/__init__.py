"""monoflow from Python: Glow-TTS synthesis, forced alignment, training and weight conversion.

The work is done by monoflow's C++ library (the same code as its command-line tools), loaded as
the extension module ``monoflow._monoflow``; tensors cross as ``torch.Tensor`` without copies.
The reference is docs/python.md.

    import monoflow
    voice = monoflow.Synthesizer("runs/quickstart/checkpoints/ckpt_000002500.pt")
    audio, rate = voice.tts("Hello there.")
"""

import torch  # noqa: F401  (loads LibTorch and torch's Python types before the module that uses them)

from ._monoflow import (
    Alignment,
    ConvertReport,
    FileError,
    OptionError,
    SynthesisResult,
    Synthesizer,
    TrainSummary,
    UserError,
    align,
    convert_weights,
    load_weights,
    train,
)

__all__ = [
    "Alignment",
    "ConvertReport",
    "FileError",
    "OptionError",
    "SynthesisResult",
    "Synthesizer",
    "TrainSummary",
    "UserError",
    "align",
    "convert_weights",
    "load_weights",
    "train",
]

"""Type stubs of monoflow._monoflow (python/src/*.cpp); docs/python.md is the reference."""

from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch

class UserError(RuntimeError):
    """A problem the user can fix (config, data, paths, options); the message says what."""

class FileError(UserError):
    """A problem at a place in a file: '<file>:<line>: <what>'."""

    file: str
    line: int

class OptionError(UserError):
    """A bad value of one config key: '<key>: <problem>'."""

    key: str
    problem: str

class SynthesisResult:
    @property
    def mel(self) -> torch.Tensor: ...  # float32 [n_mels, frames]
    @property
    def alignment(self) -> torch.Tensor: ...  # float32 [tokens, frames]
    @property
    def audio(self) -> torch.Tensor: ...  # float32 [samples]
    @property
    def sample_rate(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def unknown_report(self) -> str: ...

class Synthesizer:
    def __init__(
        self,
        checkpoint: str,
        config: Optional[str] = None,
        device: str = "cpu",
        vocoder: Optional[str] = None,
        *,
        overrides: Sequence[str] = ...,
        speaker: Optional[int] = None,
        noise_scale: float = 0.667,
        length_scale: float = 1.0,
        griffin_lim_iters: int = 32,
        seed: int = 1234,
        max_frames: int = 30000,
    ) -> None: ...
    def tts(self, text: str, speaker: Optional[int] = None) -> Tuple[torch.Tensor, int]: ...
    def mel(self, text: str, speaker: Optional[int] = None) -> torch.Tensor: ...
    def synthesize(self, text: str, speaker: Optional[int] = None) -> SynthesisResult: ...

class Alignment:
    @property
    def durations(self) -> Dict[str, torch.Tensor]: ...  # id -> int64 [tokens]
    @property
    def tokens(self) -> Dict[str, List[str]]: ...
    @property
    def out_dir(self) -> str: ...
    @property
    def utterances(self) -> int: ...
    @property
    def bad_lines(self) -> int: ...
    @property
    def words(self) -> int: ...
    @property
    def audio_seconds(self) -> float: ...
    @property
    def mean_mle(self) -> float: ...
    @property
    def recentred_ms(self) -> float: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def backend(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def summary_path(self) -> str: ...

def align(
    checkpoint: Union[str, Sequence[str]],
    *,
    dataset_dir: Optional[str] = None,
    filelist: Optional[str] = None,
    out_dir: Optional[str] = None,
    config: Optional[str] = None,
    overrides: Sequence[str] = ...,
    device: str = "cpu",
    batch_size: int = 0,
    cache_dir: Optional[str] = None,
    images: bool = False,
    min_pause_ms: float = 40.0,
    junction: str = "centre",
    silence_edge_ms: Optional[float] = None,
    recentre: bool = False,
    progress: bool = False,
) -> Alignment: ...

class TrainSummary:
    @property
    def step(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def checkpoint(self) -> str: ...
    @property
    def interrupted(self) -> bool: ...
    @property
    def signal(self) -> int: ...
    @property
    def stop_reason(self) -> str: ...

def train(
    config: str,
    overrides: Sequence[str] = ...,
    *,
    run_dir: Optional[str] = None,
    resume: Union[bool, str] = False,
    force_new: bool = False,
    init_from: Optional[str] = None,
    max_steps: Optional[int] = None,
    max_minutes: float = 0.0,
    align_backend: Optional[str] = None,
    compare_align: bool = False,
    quiet: bool = False,
) -> TrainSummary: ...

class ConvertReport:
    @property
    def summary(self) -> str: ...
    @property
    def tensors(self) -> int: ...
    @property
    def parameters(self) -> int: ...
    @property
    def keys(self) -> List[Tuple[str, List[int]]]: ...
    @property
    def wrote(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def iteration(self) -> int: ...

def convert_weights(
    src: str,
    dst: Optional[str] = None,
    *,
    to_official: bool = False,
    checkpoint: bool = False,
    dilation_rate: int = 1,
) -> ConvertReport: ...

def load_weights(path: str) -> Dict[str, torch.Tensor]: ...

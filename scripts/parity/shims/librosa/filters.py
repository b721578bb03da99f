import numpy as np


def mel(sr=22050, n_fft=1024, n_mels=128, fmin=0.0, fmax=None, *args, **kwargs):
    return np.full((n_mels, n_fft // 2 + 1), np.nan, dtype=np.float32)

import numpy as np


def pad_center(data, size=None, *args, **kwargs):
    return np.full(size, np.nan, dtype=np.float64)


def normalize(x, *args, **kwargs):
    return np.full_like(x, np.nan, dtype=np.float64)


def tiny(x):
    return np.finfo(np.float32).tiny

from . import wavfile  # noqa: F401

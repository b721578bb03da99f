"""Stand-in for scipy where it is not installed (see ../README.md)."""
from . import io, signal  # noqa: F401

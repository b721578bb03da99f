"""The console scripts of the wheel (monoflow-train, monoflow-synthesize, ...): each runs the
tool of the same name that the wheel carries in monoflow/bin/, with the same arguments, in
this process's place (its exit status is the tool's)."""

import os
import sys


def _run(tool: str) -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", tool)
    if not os.access(path, os.X_OK):
        sys.exit(f"monoflow-{tool}: {path} is missing; reinstall monoflow (pip install --no-build-isolation .)")
    os.execv(path, [f"monoflow-{tool}"] + sys.argv[1:])


def train() -> None:
    _run("train")


def synthesize() -> None:
    _run("synthesize")


def align() -> None:
    _run("align")


def convert_weights() -> None:
    _run("convert_weights")


def tokens() -> None:
    _run("tokens")


def preprocess() -> None:
    _run("preprocess")


def speak() -> None:
    _run("speak")

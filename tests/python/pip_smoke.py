"""After `pip install .` (scripts/test_pip.sh): the installed package, from outside the source
tree, trains a tiny model, synthesizes and aligns with it, and its console scripts run."""

import os
import subprocess
import sys
import tempfile

import monoflow
from conftest import tiny_config_yaml, write_tiny_corpus

site = os.path.dirname(os.path.dirname(monoflow.__file__))
assert site.endswith("site-packages"), f"monoflow was imported from {monoflow.__file__}, not the installed package"
with tempfile.TemporaryDirectory() as work:
    corpus, config = os.path.join(work, "corpus"), os.path.join(work, "tiny.yaml")
    write_tiny_corpus(corpus)
    with open(config, "w") as f:
        f.write(tiny_config_yaml(corpus, os.path.join(work, "run"), 3))
    checkpoint = monoflow.train(config, quiet=True).checkpoint
    audio, rate = monoflow.Synthesizer(checkpoint).tts("Hello from Python.")
    durations = monoflow.align(checkpoint, dataset_dir=corpus).durations
    assert rate == 22050 and audio.numel() > 0 and len(durations) == 10
    print(f"pip_smoke: {monoflow.__file__}: {audio.numel() / rate:.2f} s of audio, {len(durations)} utterances aligned")
bin_dir = os.path.dirname(sys.executable)
for script in ("monoflow-train", "monoflow-synthesize", "monoflow-align", "monoflow-convert-weights"):
    subprocess.run([os.path.join(bin_dir, script), "--help"], check=True, capture_output=True)
print("pip_smoke: console scripts run")

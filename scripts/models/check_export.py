#!/usr/bin/env python3
"""ctest models_python_reads_export: Python's torch.load (weights_only=True, the default since
torch 2.6) reads what monoflow exports, with the official keys, order and values.

Usage: check_export.py <convert_weights binary> <official checkpoint .pt> <scratch dir>
"""
import os
import subprocess
import sys

import torch

tool, official, scratch = sys.argv[1:4]
os.makedirs(scratch, exist_ok=True)
orig = torch.load(official)["model"]
for flag, name in (([], "sd.pt"), (["--checkpoint"], "ck.pt")):
    out = os.path.join(scratch, name)
    subprocess.run([tool, official, out, "--dilation-rate", "2", *flag], check=True)
    loaded = torch.load(out)
    sd = loaded["model"] if flag else loaded
    assert list(sd.keys()) == list(orig.keys()), f"{name}: keys or order differ"
    for k in sd:
        assert sd[k].dtype == orig[k].dtype and torch.equal(sd[k], orig[k]), f"{name}: {k} differs"
    print(f"{name}: {len(sd)} tensors identical to {os.path.basename(official)}")

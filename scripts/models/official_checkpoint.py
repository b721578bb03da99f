#!/usr/bin/env python3
"""Checkpoints written the way the official Glow-TTS writes them, for the tests that read them.

The official train.py keeps its optimizer in commons.Adam: a torch.optim.Adam whose learning
rate follows the noam schedule, computed with numpy (so it is a numpy.float64), and saves with
utils.save_checkpoint: torch.save({'model', 'iteration', 'optimizer', 'learning_rate'}).
init.py writes ddi_G.pth with the same function before any step. This script does the same to
a torch.nn.Module whose state_dict has the given keys and shapes:

  G_1.pth         after one Adam step, zip format; learning_rate as the optimizer holds it
  G_1_legacy.pth  the same with _use_new_zipfile_serialization=False (torch < 1.6's format)
  ddi_G.pth       before any step: iteration 0, an empty optimizer state, learning_rate 1.0
  <file>.values   per file, its model tensors, a line each: key, shape (AxB), float32 bytes in hex
  G_1.meta        iteration, learning_rate, the optimizer's lr (float.hex), betas, eps

Usage: official_checkpoint.py KEYS.txt OUT_DIR
KEYS.txt: lines "key AxBxC" ('#' comments), as tests/models/data/ljspeech_state_dict_keys.txt.
"""
import os
import sys

import numpy as np
import torch


class NoamAdam:
    """The official commons.Adam: lr * d^-0.5 * min(step^-0.5, step * warmup^-1.5), in numpy."""

    def __init__(self, params, dim_model, warmup_steps=4000, lr=1.0, betas=(0.9, 0.98), eps=1e-9):
        self.dim_model, self.warmup_steps, self.lr = dim_model, warmup_steps, lr
        self.step_num = 1
        self.cur_lr = lr * self._scale()
        self._optim = torch.optim.Adam(params, lr=self.cur_lr, betas=betas, eps=eps)

    def _scale(self):
        return np.power(self.dim_model, -0.5) * np.min(
            [np.power(self.step_num, -0.5), self.step_num * np.power(self.warmup_steps, -1.5)])

    def step(self):
        self._optim.step()
        self.step_num += 1
        self.cur_lr = self.lr * self._scale()
        for group in self._optim.param_groups:
            group["lr"] = self.cur_lr

    def zero_grad(self):
        self._optim.zero_grad()

    def state_dict(self):
        return self._optim.state_dict()


def save_checkpoint(model, optimizer, learning_rate, iteration, checkpoint_path, **save_args):
    """utils.save_checkpoint of the official code (plus torch.save's format argument)."""
    state_dict = model.module.state_dict() if hasattr(model, "module") else model.state_dict()
    torch.save({"model": state_dict, "iteration": iteration, "optimizer": optimizer.state_dict(),
                "learning_rate": learning_rate}, checkpoint_path, **save_args)


def read_keys(path):
    keys = []
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            key, shape = line.split()
            keys.append((key, tuple(int(n) for n in shape.split("x"))))
    return keys


def module_with(keys, gen):
    """A module tree whose state_dict() has these keys, with values a model could train from:
    InvConvNear weights orthogonal with a positive determinant, LayerNorm gammas near 1."""
    root = torch.nn.Module()
    for key, shape in keys:
        *path, name = key.split(".")
        m = root
        for part in path:
            if not hasattr(m, part):
                m.add_module(part, torch.nn.Module())
            m = getattr(m, part)
        if len(shape) == 2 and shape[0] == shape[1] and ".flows." in key:
            q, _ = torch.linalg.qr(torch.randn(*shape, generator=gen, dtype=torch.float64))
            if torch.det(q) < 0:
                q[:, 0] = -q[:, 0]
            value = q.float()
        else:
            value = torch.randn(*shape, generator=gen) * 0.1
            if name == "gamma":
                value = value + 1
        m.register_parameter(name, torch.nn.Parameter(value))
    return root


def write_values(model, path):
    with open(path, "w") as f:
        for key, t in model.state_dict().items():
            shape = "x".join(map(str, t.shape))
            f.write(f"{key} {shape} {t.float().contiguous().numpy().tobytes().hex()}\n")


def main():
    keys_path, out = sys.argv[1:3]
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(4321)
    model = module_with(read_keys(keys_path), gen)
    dim_model = dict(read_keys(keys_path))["encoder.emb.weight"][1]
    optimizer = NoamAdam(model.parameters(), dim_model, warmup_steps=20)

    # init.py: ddi_G.pth before any update, with the config's learning rate (a Python float).
    save_checkpoint(model, optimizer, 1.0, 0, os.path.join(out, "ddi_G.pth"))
    write_values(model, os.path.join(out, "ddi_G.pth.values"))

    optimizer.zero_grad()
    loss = sum((p * p).sum() for p in model.parameters())
    loss.backward()
    optimizer.step()
    assert isinstance(optimizer.cur_lr, np.float64)
    save_checkpoint(model, optimizer, optimizer.cur_lr, 1, os.path.join(out, "G_1.pth"))
    save_checkpoint(model, optimizer, optimizer.cur_lr, 1, os.path.join(out, "G_1_legacy.pth"),
                    _use_new_zipfile_serialization=False)
    write_values(model, os.path.join(out, "G_1.pth.values"))
    group = optimizer.state_dict()["param_groups"][0]
    with open(os.path.join(out, "G_1.meta"), "w") as f:
        f.write(f"iteration 1\nlearning_rate {float(optimizer.cur_lr).hex()}\nlr {float(group['lr']).hex()}\n"
                f"betas {group['betas'][0].hex()} {group['betas'][1].hex()}\neps {group['eps'].hex()}\n"
                f"params {len(group['params'])}\n")


if __name__ == "__main__":
    main()

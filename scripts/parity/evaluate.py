#!/usr/bin/env python3
"""One judge for both trainers: every checkpoint (official G_<step>.pth, or monoflow's converted
with `convert_weights --to-official`) is loaded into the official FlowGenerator and measured the
same way, in float32 (TF32 off), in eval mode:

- val_mle, val_duration: commons.mle_loss and commons.duration_loss over the whole validation
  filelist as one batch (TextMelCollate), MAS by the official monotonic_align;
- the fixed sentence (the validation filelist's first line) synthesised at noise scale 0:
  its frames against the recording's, and the mean absolute log-mel difference after the
  generated mel is stretched linearly to the recording's length (sent_l1).

Usage: evaluate.py --official DIR --config CONFIG.json --val-list LIST --run NAME CKPT... >> evals.jsonl
The checkpoint's step is taken from its name (G_<step>.pth, ckpt_<step>.pt or <anything>_<step>.pth).
"""
import argparse
import json
import os
import re
import sys

from hparams import HParams, load_hparams



def step_of(path):
    m = re.search(r"(\d+)\.(pth|pt)$", os.path.basename(path))
    if not m:
        sys.exit(f"evaluate: {path}: no step number in the file name")
    return int(m.group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--official", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--val-list", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--mel-dir", help="write the fixed sentence's generated mel as <run>_<step>.npy here")
    p.add_argument("checkpoints", nargs="+")
    args = p.parse_args()
    sys.path.insert(0, os.path.abspath(args.official))
    import numpy as np
    import torch
    import torch.nn.functional as F

    import commons
    import models
    from data_utils import TextMelCollate, TextMelLoader
    from text.symbols import symbols

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    hps = load_hparams(args.config)
    data = dict(hps.data)
    data["validation_files"] = args.val_list
    data = HParams(data)
    device = torch.device(args.device)
    val = TextMelLoader(args.val_list, data)
    batch = [t.to(device) for t in TextMelCollate(1)([val[i] for i in range(len(val))])]
    with open(args.val_list) as f:
        mel_path, text = f.readline().rstrip("\n").split("|")[:2]
    sent_x = val.get_text(text).long().unsqueeze(0).to(device)
    sent_true = torch.from_numpy(np.load(mel_path)).float().to(device)

    n_vocab = len(symbols) + getattr(hps.data, "add_blank", False)
    model = models.FlowGenerator(n_vocab=n_vocab, out_channels=hps.data.n_mel_channels, **hps.model).to(device)
    for path in args.checkpoints:
        state = torch.load(path, map_location=device, weights_only=False)
        state = state.get("model", state) if isinstance(state, dict) else state
        model.load_state_dict(state, strict=True)
        model.eval()
        with torch.no_grad():
            x, x_lengths, y, y_lengths = batch
            (z, z_m, z_logs, logdet, z_mask), _, (attn, logw, logw_) = model(x, x_lengths, y, y_lengths, gen=False)
            l_mle = commons.mle_loss(z, z_m, z_logs, logdet, z_mask).item()
            l_dur = commons.duration_loss(logw, logw_, x_lengths).item()
            sent_lengths = torch.tensor([sent_x.size(1)], device=device)
            (gen, *_), *_ = model(sent_x, sent_lengths, gen=True, noise_scale=0.0, length_scale=1.0)
            gen = gen[0]
            stretched = F.interpolate(gen.unsqueeze(0), size=sent_true.size(1), mode="linear",
                                      align_corners=True)[0]
            l1 = (stretched - sent_true).abs().mean().item()
        step = step_of(path)
        if args.mel_dir:
            os.makedirs(args.mel_dir, exist_ok=True)
            np.save(os.path.join(args.mel_dir, f"{args.run.replace('/', '_')}_{step}.npy"), gen.float().cpu().numpy())
        print(json.dumps({"run": args.run, "step": step, "val_mle": round(l_mle, 5), "val_duration": round(l_dur, 5),
                          "val_total": round(l_mle + l_dur, 5), "sent_frames": int(gen.size(1)),
                          "sent_true_frames": int(sent_true.size(1)), "sent_l1": round(l1, 4)}), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Export a HiFi-GAN generator checkpoint to the TorchScript file `synthesize --vocoder` runs.

    export_hifigan.py g_02500000 -o hifigan.ts              # config.json beside the checkpoint
    export_hifigan.py GENERATOR --config config.json -o hifigan.ts
    export_hifigan.py --tiny-random tiny/g_00000000          # a tiny random checkpoint (tests)
    export_hifigan.py CKPT --reference mel.npy audio.npy     # the eager generator on a saved mel

Reads the files the public HiFi-GAN training code writes (jik876/hifi-gan): a torch.save'd dict
whose "generator" entry is the generator's state dict, with weight norm's `weight_g`/`weight_v`
(or torch's newer `parametrizations.weight.original0/1`), and the config.json of that run
(V1, V2 and V3 generators). The generator is written here from the HiFi-GAN paper's description;
the parameter names are the public checkpoints', so they load strictly. The export folds weight
norm into plain weights, scripts the module, checks it against the weight-normed one and saves
it: a module taking a log-mel [B, n_mels, frames] and returning audio [B, 1, frames * hop].
Needs only torch (numpy for --reference). docs/vocoder.md has the recipe.
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm

# monoflow's mel recipe (configs/ljspeech.yaml data.*; src/data/mel.h), under the names
# HiFi-GAN's config.json gives them.
MONOFLOW_MEL = {"sampling_rate": 22050, "n_fft": 1024, "hop_size": 256, "win_size": 1024,
                "num_mels": 80, "fmin": 0, "fmax": 8000}

CONFIG_KEYS = ("resblock", "upsample_rates", "upsample_kernel_sizes", "upsample_initial_channel",
               "resblock_kernel_sizes", "resblock_dilation_sizes", "num_mels")


class ExportError(Exception):
    pass


def same_padding(kernel_size, dilation):
    return (kernel_size - 1) * dilation // 2


class ResBlock1(nn.Module):
    """Three dilated convolutions (convs1), each followed by a plain one (convs2), each pair residual."""

    def __init__(self, channels, kernel_size, dilations):
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=same_padding(kernel_size, d))
            for d in dilations[:3])
        self.convs2 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, padding=same_padding(kernel_size, 1))
            for _ in dilations[:3])

    def forward(self, x):
        for dilated, plain in zip(self.convs1, self.convs2):
            x = x + plain(F.leaky_relu(dilated(F.leaky_relu(x, 0.1)), 0.1))
        return x


class ResBlock2(nn.Module):
    """Two dilated convolutions (convs), each residual: the small generator's (V3) block."""

    def __init__(self, channels, kernel_size, dilations):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=same_padding(kernel_size, d))
            for d in dilations[:2])

    def forward(self, x):
        for conv in self.convs:
            x = x + conv(F.leaky_relu(x, 0.1))
        return x


class Generator(nn.Module):
    """conv_pre; per upsampling stage a transposed convolution, then the mean of the stage's
    residual blocks (one per kernel size: multi-receptive-field fusion); conv_post; tanh."""

    def __init__(self, h):
        super().__init__()
        self.num_kernels = len(h["resblock_kernel_sizes"])
        channels = h["upsample_initial_channel"]
        self.conv_pre = nn.Conv1d(h["num_mels"], channels, 7, padding=3)
        self.ups = nn.ModuleList()
        self.resblocks = nn.ModuleList()
        block = ResBlock1 if str(h["resblock"]) == "1" else ResBlock2
        for rate, kernel in zip(h["upsample_rates"], h["upsample_kernel_sizes"]):
            self.ups.append(nn.ConvTranspose1d(channels, channels // 2, kernel, rate, padding=(kernel - rate) // 2))
            channels //= 2
            for k, d in zip(h["resblock_kernel_sizes"], h["resblock_dilation_sizes"]):
                self.resblocks.append(block(channels, k, d))
        self.conv_post = nn.Conv1d(channels, 1, 7, padding=3)

    # Leaky ReLUs of slope 0.1 inside (a literal: TorchScript does not read module globals); the
    # last, before conv_post, has torch's default 0.01, as in the public generator.
    def forward(self, mel):
        x = self.conv_pre(mel)
        for stage, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, 0.1))
            mixed = torch.zeros_like(x)  # 0 + a is exact: the same sums as starting from block 0
            for index, block in enumerate(self.resblocks):
                if index // self.num_kernels == stage:
                    mixed = mixed + block(x)
            x = mixed / self.num_kernels
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


def convolutions(module):
    return [m for m in module.modules() if isinstance(m, (nn.Conv1d, nn.ConvTranspose1d))]


def with_weight_norm(generator):
    for conv in convolutions(generator):
        weight_norm(conv)  # dim 0, as the public checkpoints' weight_g shapes say
    return generator


def fold_weight_norm(generator):
    for conv in convolutions(generator):
        parametrize.remove_parametrizations(conv, "weight", leave_parametrized=True)
    return generator


# weight norm's two names: the public checkpoints' (torch.nn.utils.weight_norm) and torch's
# parametrizations, which the module here uses.
OLD_TO_NEW = {".weight_g": ".parametrizations.weight.original0",
              ".weight_v": ".parametrizations.weight.original1"}


def renamed(state, suffixes):
    """`state` with each key's suffix renamed by `suffixes` (old suffix -> new)."""
    out = {}
    for key, value in state.items():
        for old, new in suffixes.items():
            if key.endswith(old):
                key = key[: -len(old)] + new
                break
        out[key] = value
    return out


def to_parametrization_names(state):
    return renamed(state, OLD_TO_NEW)


def to_public_names(state):
    return renamed(state, {new: old for old, new in OLD_TO_NEW.items()})


def config_fields_for(key):
    """The config.json fields that decide a parameter's presence and shape."""
    if key.startswith("conv_pre"):
        return "num_mels, upsample_initial_channel"
    if key.startswith("ups."):
        return "upsample_rates, upsample_kernel_sizes, upsample_initial_channel"
    if key.startswith("resblocks."):
        return "resblock, resblock_kernel_sizes, resblock_dilation_sizes, upsample_rates"
    if key.startswith("conv_post"):
        return "upsample_rates, upsample_initial_channel"
    return "none (not a HiFi-GAN generator parameter)"


def read_config(path):
    if not os.path.isfile(path):
        raise ExportError(f"{path}: no such file; pass the config.json of the run that wrote the checkpoint "
                          "with --config (the public folders and train.py's checkpoint folder hold one)")
    try:
        with open(path, encoding="utf-8") as f:
            h = json.load(f)
    except (OSError, ValueError) as e:
        raise ExportError(f"{path}: not a readable JSON config: {e}") from e
    if not isinstance(h, dict):
        raise ExportError(f"{path}: expected a JSON object (HiFi-GAN's config.json)")
    missing = [k for k in CONFIG_KEYS if k not in h]
    if missing:
        raise ExportError(f"{path}: lacks {', '.join(missing)} (a HiFi-GAN config.json has them all)")
    if str(h["resblock"]) not in ("1", "2"):
        raise ExportError(f"{path}: resblock is {h['resblock']!r}; HiFi-GAN has \"1\" (V1, V2) or \"2\" (V3)")
    for a, b in (("upsample_rates", "upsample_kernel_sizes"), ("resblock_kernel_sizes", "resblock_dilation_sizes")):
        if not isinstance(h[a], list) or not isinstance(h[b], list) or len(h[a]) != len(h[b]) or not h[a]:
            raise ExportError(f"{path}: {a} and {b} must be non-empty lists of the same length")
    need = 3 if str(h["resblock"]) == "1" else 2
    for i, d in enumerate(h["resblock_dilation_sizes"]):
        if not isinstance(d, list) or len(d) < need:
            raise ExportError(f"{path}: resblock_dilation_sizes[{i}] is {d!r}; resblock \"{h['resblock']}\" "
                              f"uses {need} dilations per block")
    return h


def read_generator_state(path, unsafe_load):
    if not os.path.isfile(path):
        raise ExportError(f"{path}: no such file (a HiFi-GAN generator checkpoint: g_XXXXXXXX from train.py, "
                          "or a public folder's generator file)")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=not unsafe_load)
    except Exception as e:  # torch raises several kinds for a file it cannot read
        hint = "" if unsafe_load else (" If you trust the file and it holds more than tensors, "
                                       "--unsafe-load reads it with full unpickling.")
        raise ExportError(f"{path}: cannot read as a torch checkpoint: {str(e).splitlines()[0]}.{hint}") from e
    if not isinstance(checkpoint, dict) or "generator" not in checkpoint:
        keys = ", ".join(map(str, list(checkpoint)[:8])) if isinstance(checkpoint, dict) else type(checkpoint).__name__
        hint = (" That is the discriminator/optimizer file (do_XXXXXXXX); export g_XXXXXXXX."
                if isinstance(checkpoint, dict) and "mpd" in checkpoint else "")
        raise ExportError(f"{path}: no \"generator\" entry (found: {keys}); HiFi-GAN's generator "
                          f"checkpoints are {{'generator': state_dict}}.{hint}")
    state = checkpoint["generator"]
    if not isinstance(state, dict) or not all(torch.is_tensor(v) for v in state.values()):
        raise ExportError(f"{path}: \"generator\" is not a state dict of tensors")
    return state


def check_state_matches(state, generator, ckpt_path, config_path):
    """A clear error for the first parameters that the config's generator and the weights disagree on."""
    expected = generator.state_dict()
    problems = []
    for key, value in state.items():
        public = to_public_names({key: None}).popitem()[0]
        if key not in expected:
            problems.append(f"{public} is in the checkpoint but not in the generator {config_path} describes "
                            f"(config fields: {config_fields_for(key)})")
        elif tuple(value.shape) != tuple(expected[key].shape):
            problems.append(f"{public} has shape {list(value.shape)} in the checkpoint, "
                            f"{list(expected[key].shape)} from {config_path} (config fields: {config_fields_for(key)})")
    for key in expected:
        if key not in state:
            public = to_public_names({key: None}).popitem()[0]
            problems.append(f"{public} is missing from the checkpoint but the generator {config_path} "
                            f"describes has it (config fields: {config_fields_for(key)})")
    if problems:
        shown = "\n  ".join(problems[:6])
        more = f"\n  ... and {len(problems) - 6} more" if len(problems) > 6 else ""
        raise ExportError(f"{ckpt_path} does not match {config_path}:\n  {shown}{more}\n"
                          "Use the config.json of the run that wrote this checkpoint.")


def load_generator(ckpt_path, config_path, unsafe_load=False):
    """The weight-normed generator with the checkpoint's weights, strictly loaded, in eval mode."""
    state = to_parametrization_names(read_generator_state(ckpt_path, unsafe_load))
    h = read_config(config_path)
    generator = with_weight_norm(Generator(h))
    check_state_matches(state, generator, ckpt_path, config_path)
    generator.load_state_dict(state, strict=True)
    return generator.eval(), h


def recipe_warnings(h):
    warnings = []
    for key, ours in MONOFLOW_MEL.items():
        if key != "num_mels" and key in h and h[key] is not None and float(h[key]) != float(ours):
            warnings.append(f"config {key} = {h[key]}, monoflow's mels use {ours}")
    if int(h["num_mels"]) != MONOFLOW_MEL["num_mels"]:
        warnings.append(f"this generator takes {h['num_mels']} mel channels; monoflow's configs make "
                        f"{MONOFLOW_MEL['num_mels']} (data.n_mel_channels), and synthesize fails on the mismatch")
    hop = math.prod(h["upsample_rates"])
    if hop != h.get("hop_size", hop):
        warnings.append(f"the upsample rates multiply to {hop}, config hop_size is {h['hop_size']}")
    if hop != MONOFLOW_MEL["hop_size"]:
        warnings.append(f"the generator makes {hop} samples a frame; monoflow's frames are "
                        f"{MONOFLOW_MEL['hop_size']} samples (data.hop_length)")
    return warnings


def max_abs_diff(a, b):
    return (a - b).abs().max().item()


def export(args):
    config_path = args.config or os.path.join(os.path.dirname(os.path.abspath(args.checkpoint)), "config.json")
    generator, h = load_generator(args.checkpoint, config_path, args.unsafe_load)
    n_mels, hop = int(h["num_mels"]), math.prod(h["upsample_rates"])
    warnings = recipe_warnings(h)
    for w in warnings:
        print(f"export_hifigan: warning: {w}", file=sys.stderr)
    if warnings:
        print("export_hifigan: warning: the vocoder must be trained on monoflow's mel recipe (22.05 kHz, hop 256, "
              "80 bands, fmax 8000, natural log of max(mel, 1e-5)), or on a monoflow config whose data.* "
              "settings match its config.json; docs/vocoder.md", file=sys.stderr)
    if args.reference:
        write_reference(generator, args.reference[0], args.reference[1], n_mels)
    if not args.output:
        return
    folded = folded_copy(generator, h)
    scripted = torch.jit.script(folded)
    # A log-mel in monoflow's range (silence is log(1e-5) = -11.5) for the check.
    mel = torch.empty(1, n_mels, args.check_frames).uniform_(-11.5, 2.0, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        eager = generator(mel)
        diff = max_abs_diff(scripted(mel), eager)
    print(f"export_hifigan: scripted vs eager (weight-normed) generator on a [1, {n_mels}, {args.check_frames}] "
          f"mel: max abs diff {diff:.3g}")
    if not diff <= args.tolerance:
        raise ExportError(f"the scripted generator differs from the eager one by {diff:.3g} "
                          f"(over --tolerance {args.tolerance}); nothing written")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    torch.jit.save(scripted, args.output)
    with torch.no_grad():
        reloaded = max_abs_diff(torch.jit.load(args.output)(mel), eager)
    if not reloaded <= args.tolerance:
        raise ExportError(f"{args.output}: reloaded, it differs from the eager generator by {reloaded:.3g}")
    params = sum(p.numel() for p in folded.parameters())
    print(f"export_hifigan: wrote {args.output}: resblock {h['resblock']}, {params} parameters, "
          f"[B, {n_mels}, frames] -> [B, 1, frames * {hop}]")


def folded_copy(generator, h):
    """A copy of the weight-normed generator with plain weights (w = g * v / |v|), in eval mode."""
    copy = with_weight_norm(Generator(h))
    copy.load_state_dict(generator.state_dict())
    return fold_weight_norm(copy).eval()


def write_reference(generator, mel_path, out_path, n_mels):
    import numpy as np  # only this mode needs it

    mel = torch.from_numpy(np.load(mel_path).astype(np.float32))
    if mel.dim() == 2:
        mel = mel.unsqueeze(0)
    if mel.dim() != 3 or mel.size(1) != n_mels:
        raise ExportError(f"{mel_path}: a mel of shape {list(mel.shape)}; the generator takes [{n_mels}, frames]")
    with torch.no_grad():
        audio = generator(mel)
    np.save(out_path, audio.flatten().numpy())
    print(f"export_hifigan: wrote {out_path}: {audio.numel()} samples from {mel.size(-1)} frames")


def tiny_random(path, resblock, seed, num_mels):
    """A tiny generator with random weights in the public checkpoint format, and its config.json."""
    v1 = resblock == "1"
    h = {"resblock": resblock, "upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
         "upsample_initial_channel": 16, "resblock_kernel_sizes": [3, 5] if v1 else [3, 7],
         "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]] if v1 else [[1, 2], [2, 6]],
         "segment_size": 8192, "num_mels": num_mels, "num_freq": 1025, "n_fft": 1024, "hop_size": 256,
         "win_size": 1024, "sampling_rate": 22050, "fmin": 0, "fmax": 8000, "fmax_for_loss": None}
    torch.manual_seed(seed)
    generator = with_weight_norm(Generator(h))
    with torch.no_grad():  # weights large enough that the output is not all ~0
        for conv in convolutions(generator):
            conv.parametrizations.weight.original0.uniform_(0.5, 1.5)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    torch.save({"generator": to_public_names(generator.state_dict())}, path)
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump(h, f, indent=4)
    print(f"export_hifigan: wrote {path} and {os.path.join(folder, 'config.json')} (random weights)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\nReads")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", nargs="?", help="HiFi-GAN generator checkpoint (g_XXXXXXXX)")
    p.add_argument("--config", help="its config.json (default: config.json beside the checkpoint)")
    p.add_argument("-o", "--output", help="the TorchScript file to write (synthesize --vocoder)")
    p.add_argument("--reference", nargs=2, metavar=("MEL_NPY", "AUDIO_NPY"),
                   help="also run the eager generator on a [n_mels, frames] float32 .npy mel and save its audio")
    p.add_argument("--check-frames", type=int, default=48, help="frames of the mel the export is checked on (%(default)s)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest scripted-vs-eager difference accepted (%(default)s)")
    p.add_argument("--unsafe-load", action="store_true",
                   help="read the checkpoint with full unpickling (only for a file you trust)")
    p.add_argument("--tiny-random", metavar="OUT_CKPT",
                   help="write a tiny random-weight generator checkpoint and config.json beside it, then stop")
    p.add_argument("--resblock", choices=("1", "2"), default="1", help="--tiny-random's residual block kind (%(default)s)")
    p.add_argument("--seed", type=int, default=1, help="--tiny-random's seed (%(default)s)")
    p.add_argument("--num-mels", type=int, default=80, help="--tiny-random's mel channels (%(default)s)")
    args = p.parse_args(argv)
    try:
        if args.tiny_random:
            tiny_random(args.tiny_random, args.resblock, args.seed, args.num_mels)
            return 0
        if not args.checkpoint or not (args.output or args.reference):
            p.error("give a checkpoint and -o OUT.ts (or --reference), or --tiny-random OUT_CKPT")
        export(args)
    except ExportError as e:
        print(f"export_hifigan: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

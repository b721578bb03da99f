#!/usr/bin/env python3
"""Reference data for tests/models (run once; its outputs are committed).

1. tests/models/data/ljspeech_state_dict_keys.txt: the official Glow-TTS state_dict keys and
   shapes for the ljspeech configuration with 148 symbols and 80 mels, enumerated here from the
   structure of the official models.py / modules.py / attentions.py (module registration order,
   torch.nn.utils.weight_norm's bias/weight_g/weight_v), checked to total 28,623,889.
2. tests/models/data/tiny_official_checkpoint.pt: a checkpoint dict in the official format
   ({"model": OrderedDict state_dict with _metadata, "iteration", "optimizer", "learning_rate"})
   for a tiny multi-speaker configuration, with random weights.
   tiny_official_checkpoint_legacy.pt: the same in the legacy (pre torch 1.6) format.
3. tests/models/data/tiny_reference.pt: inputs and float64 outputs of an independent
   functional re-implementation below (encoder, decoder, logp) for those weights.

4. tests/models/data/variant_state_dict_keys.txt: the same for VARIANT (no prenet, no
   relative attention, proj_s, speakers).

Usage: .venv/bin/python scripts/models/make_reference.py [out_dir] [--keys-only]
"""
import collections
import math
import os
import sys

import torch
import torch.nn.functional as F

LJSPEECH = dict(n_vocab=148, out_channels=80, hidden=192, filter=768, filter_dp=256, kernel=3,
                heads=2, enc_layers=6, window=4, prenet=True, mean_only=True, blocks=12,
                hidden_dec=192, kernel_dec=5, dilation=1, block_layers=4, n_sqz=2, n_split=4,
                n_speakers=0, gin=0)
# Every optional part flipped relative to ljspeech: no prenet, no relative attention,
# proj_s, speaker embedding and conditioning, other widths.
VARIANT = dict(n_vocab=149, out_channels=80, hidden=128, filter=512, filter_dp=192, kernel=5,
               heads=4, enc_layers=3, window=0, prenet=False, mean_only=False, blocks=4,
               hidden_dec=96, kernel_dec=3, dilation=2, block_layers=3, n_sqz=4, n_split=8,
               n_speakers=10, gin=16)
TINY = dict(n_vocab=11, out_channels=4, hidden=8, filter=16, filter_dp=8, kernel=3, heads=2,
            enc_layers=2, window=2, prenet=True, mean_only=False, blocks=2, hidden_dec=8,
            kernel_dec=3, dilation=2, block_layers=2, n_sqz=2, n_split=4, n_speakers=3, gin=4)


def official_keys(c):
    """(key, shape) in the order torch's state_dict() lists them for the official model."""
    keys = []
    add = lambda k, *s: keys.append((k, tuple(s)))

    def conv(p, cin, cout, k):
        add(p + ".weight", cout, cin, k)
        add(p + ".bias", cout)

    def wn_conv(p, cin, cout, k):  # weight_norm removes weight, appends weight_g, weight_v
        add(p + ".bias", cout)
        add(p + ".weight_g", cout, 1, 1)
        add(p + ".weight_v", cout, cin, k)

    def norm(p, ch):
        add(p + ".gamma", ch)
        add(p + ".beta", ch)

    h, kc = c["hidden"], c["hidden"] // c["heads"]
    add("encoder.emb.weight", c["n_vocab"], h)
    if c["prenet"]:
        for i in range(3):
            conv(f"encoder.pre.conv_layers.{i}", h, h, 5)
        for i in range(3):
            norm(f"encoder.pre.norm_layers.{i}", h)
        conv("encoder.pre.proj", h, h, 1)
    e = "encoder.encoder"
    for i in range(c["enc_layers"]):
        a = f"{e}.attn_layers.{i}"
        if c["window"]:
            add(a + ".emb_rel_k", 1, 2 * c["window"] + 1, kc)
            add(a + ".emb_rel_v", 1, 2 * c["window"] + 1, kc)
        for n in ("q", "k", "v", "o"):
            conv(f"{a}.conv_{n}", h, h, 1)
    for i in range(c["enc_layers"]):
        norm(f"{e}.norm_layers_1.{i}", h)
    for i in range(c["enc_layers"]):
        conv(f"{e}.ffn_layers.{i}.conv_1", h, c["filter"], c["kernel"])
        conv(f"{e}.ffn_layers.{i}.conv_2", c["filter"], h, c["kernel"])
    for i in range(c["enc_layers"]):
        norm(f"{e}.norm_layers_2.{i}", h)
    conv("encoder.proj_m", h, c["out_channels"], 1)
    if not c["mean_only"]:
        conv("encoder.proj_s", h, c["out_channels"], 1)
    fd = c["filter_dp"]
    conv("encoder.proj_w.conv_1", h + c["gin"], fd, c["kernel"])
    norm("encoder.proj_w.norm_1", fd)
    conv("encoder.proj_w.conv_2", fd, fd, c["kernel"])
    norm("encoder.proj_w.norm_2", fd)
    conv("encoder.proj_w.proj", fd, 1, 1)
    ch, hd, L = c["out_channels"] * c["n_sqz"], c["hidden_dec"], c["block_layers"]
    for b in range(c["blocks"]):
        f = f"decoder.flows.{3 * b}"
        add(f + ".logs", 1, ch, 1)
        add(f + ".bias", 1, ch, 1)
        add(f"decoder.flows.{3 * b + 1}.weight", c["n_split"], c["n_split"])
        f = f"decoder.flows.{3 * b + 2}"
        wn_conv(f + ".start", ch // 2, hd, 1)
        conv(f + ".end", hd, ch, 1)
        for i in range(L):
            wn_conv(f"{f}.wn.in_layers.{i}", hd, 2 * hd, c["kernel_dec"])
        for i in range(L):
            wn_conv(f"{f}.wn.res_skip_layers.{i}", hd, 2 * hd if i < L - 1 else hd, 1)
        if c["gin"]:
            wn_conv(f + ".wn.cond_layer", c["gin"], 2 * hd * L, 1)
    if c["n_speakers"] > 1:
        add("emb_g.weight", c["n_speakers"], c["gin"])
    return keys


# ------------------------------------------------------------------------------------------
# An independent functional forward pass (float64) over a {key: tensor} dict.

def layer_norm(x, w, p, eps=1e-4):
    mu = x.mean(1, keepdim=True)
    var = ((x - mu) ** 2).mean(1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w[p + ".gamma"][None, :, None] + w[p + ".beta"][None, :, None]


def conv(x, w, p, pad=0, dil=1):
    return F.conv1d(x, w[p + ".weight"], w[p + ".bias"], padding=pad, dilation=dil)


def wn_conv(x, w, p, pad=0, dil=1):
    v, g = w[p + ".weight_v"], w[p + ".weight_g"]
    weight = v * (g / v.reshape(v.shape[0], -1).norm(dim=1).reshape(-1, 1, 1))
    return F.conv1d(x, weight, w[p + ".bias"], padding=pad, dilation=dil)


def rel_attention(x, mask, w, p, heads, window):
    b, d, t = x.shape
    kc = d // heads
    q = conv(x, w, p + ".conv_q").view(b, heads, kc, t).transpose(2, 3)
    k = conv(x, w, p + ".conv_k").view(b, heads, kc, t).transpose(2, 3)
    v = conv(x, w, p + ".conv_v").view(b, heads, kc, t).transpose(2, 3)
    # relative position r = j - i, clipped to the window; embeddings beyond it are zero
    idx = torch.arange(t)
    rel = idx[None, :] - idx[:, None]                       # [t, t]: j - i
    inside = rel.abs() <= window
    ek = w[p + ".emb_rel_k"][0][(rel.clamp(-window, window) + window)] * inside[..., None]  # [t,t,kc]
    ev = w[p + ".emb_rel_v"][0][(rel.clamp(-window, window) + window)] * inside[..., None]
    scores = (q @ k.transpose(-1, -2) + torch.einsum("bhic,ijc->bhij", q, ek)) / math.sqrt(kc)
    am = mask[:, :, None, :] * mask[:, :, :, None]          # [b,1,t,t]
    scores = scores.masked_fill(am == 0, -1e4)
    pa = torch.softmax(scores, -1)
    out = pa @ v + torch.einsum("bhij,ijc->bhic", pa, ev)
    out = out.transpose(2, 3).reshape(b, d, t)
    return conv(out, w, p + ".conv_o")


def encoder(tokens, lengths, g, w, c):
    h = c["hidden"]
    x = w["encoder.emb.weight"][tokens] * math.sqrt(h)      # [b,t,h]
    x = x.transpose(1, 2)
    t = x.shape[2]
    mask = (torch.arange(t)[None, :] < lengths[:, None]).to(x.dtype)[:, None, :]
    if c["prenet"]:
        y = x
        for i in range(3):
            y = conv(y * mask, w, f"encoder.pre.conv_layers.{i}", pad=2)
            y = torch.relu(layer_norm(y, w, f"encoder.pre.norm_layers.{i}"))
        x = (x + conv(y, w, "encoder.pre.proj")) * mask
    for i in range(c["enc_layers"]):
        e = "encoder.encoder"
        x = x * mask
        y = rel_attention(x, mask, w, f"{e}.attn_layers.{i}", c["heads"], c["window"])
        x = layer_norm(x + y, w, f"{e}.norm_layers_1.{i}")
        y = torch.relu(conv(x * mask, w, f"{e}.ffn_layers.{i}.conv_1", pad=c["kernel"] // 2))
        y = conv(y * mask, w, f"{e}.ffn_layers.{i}.conv_2", pad=c["kernel"] // 2) * mask
        x = layer_norm(x + y, w, f"{e}.norm_layers_2.{i}")
    x = x * mask
    x_m = conv(x, w, "encoder.proj_m") * mask
    x_logs = conv(x, w, "encoder.proj_s") * mask if not c["mean_only"] else torch.zeros_like(x_m)
    xd = x if g is None else torch.cat([x, g.expand(-1, -1, t)], 1)
    k = c["kernel"] // 2
    y = layer_norm(torch.relu(conv(xd * mask, w, "encoder.proj_w.conv_1", pad=k)), w, "encoder.proj_w.norm_1")
    y = layer_norm(torch.relu(conv(y * mask, w, "encoder.proj_w.conv_2", pad=k)), w, "encoder.proj_w.norm_2")
    logw = conv(y * mask, w, "encoder.proj_w.proj") * mask
    return x_m, x_logs, logw, mask


def decoder(y, y_mask, g, w, c):
    """Mel [b, C, T] -> z, logdet; T a multiple of n_sqz."""
    s, b, C, T = c["n_sqz"], *y.shape
    x = y.reshape(b, C, T // s, s).permute(0, 3, 1, 2).reshape(b, C * s, T // s)
    m = y_mask[:, :, s - 1::s]
    x = x * m
    ch, hd, ns = C * s, c["hidden_dec"], c["n_split"]
    logdet = torch.zeros(b, dtype=y.dtype)
    n_frames = m.sum((1, 2))
    for blk in range(c["blocks"]):
        f = f"decoder.flows.{3 * blk}"
        x = (w[f + ".bias"] + torch.exp(w[f + ".logs"]) * x) * m
        logdet = logdet + w[f + ".logs"].sum() * n_frames
        W = w[f"decoder.flows.{3 * blk + 1}.weight"]
        # channel c = half*(ch/2) + j*(ns/2) + r mixes over (half, r) with index half*(ns/2)+r
        xr = x.view(b, 2, ch // ns, ns // 2, -1).permute(0, 1, 3, 2, 4).reshape(b, ns, ch // ns, -1)
        zr = torch.einsum("oi,bict->boct", W, xr)
        x = zr.view(b, 2, ns // 2, ch // ns, -1).permute(0, 1, 3, 2, 4).reshape(b, ch, -1) * m
        logdet = logdet + torch.logdet(W) * (ch / ns) * n_frames
        f = f"decoder.flows.{3 * blk + 2}"
        x0, x1 = x[:, : ch // 2], x[:, ch // 2:]
        hcur = wn_conv(x0, w, f + ".start") * m
        out = torch.zeros_like(hcur)
        gc = wn_conv(g, w, f + ".wn.cond_layer") if g is not None else None
        for i in range(c["block_layers"]):
            dil = c["dilation"] ** i
            a = wn_conv(hcur, w, f"{f}.wn.in_layers.{i}", pad=(c["kernel_dec"] * dil - dil) // 2, dil=dil)
            if gc is not None:
                a = a + gc[:, i * 2 * hd:(i + 1) * 2 * hd]
            acts = torch.tanh(a[:, :hd]) * torch.sigmoid(a[:, hd:])
            rs = wn_conv(acts, w, f"{f}.wn.res_skip_layers.{i}")
            if i < c["block_layers"] - 1:
                hcur = (hcur + rs[:, :hd]) * m
                out = out + rs[:, hd:]
            else:
                out = out + rs
        st = conv(out * m, w, f + ".end")
        mean, logs = st[:, : ch // 2], st[:, ch // 2:]
        x = torch.cat([x0, (mean + torch.exp(logs) * x1) * m], 1)
        logdet = logdet + (logs * m).sum((1, 2))
    z = x.view(b, s, C, -1).permute(0, 2, 3, 1).reshape(b, C, T) * y_mask
    return z, logdet


def log_likelihood_matrix(x_m, x_logs, z):
    # [b, t, s]: sum over channels of log N(z[:, :, s] | x_m[:, :, t], exp(x_logs[:, :, t]))
    d = z[:, :, None, :] - x_m[:, :, :, None]               # [b, c, t, s]
    ll = -0.5 * math.log(2 * math.pi) - x_logs[..., None] - 0.5 * d ** 2 * torch.exp(-2 * x_logs[..., None])
    return ll.sum(1)


def write_keys(path, cfg, title):
    keys = official_keys(cfg)
    total = sum(math.prod(s) for _, s in keys)
    with open(path, "w") as f:
        f.write(f"# official Glow-TTS state_dict, {title}: {len(keys)} tensors, {total} parameters\n")
        for k, s in keys:
            f.write(f"{k} {'x'.join(map(str, s))}\n")
    return keys, total


def main():
    keys_only = "--keys-only" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--keys-only"]
    sys.argv = [sys.argv[0]] + args
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "data")
    os.makedirs(out_dir, exist_ok=True)

    keys, total = write_keys(os.path.join(out_dir, "ljspeech_state_dict_keys.txt"), LJSPEECH,
                             "ljspeech config, 148 symbols, 80 mels")
    assert total == 28623889, total
    print(f"ljspeech: {len(keys)} keys, {total} parameters")
    keys, total = write_keys(os.path.join(out_dir, "variant_state_dict_keys.txt"), VARIANT, str(VARIANT))
    print(f"variant: {len(keys)} keys, {total} parameters")
    if keys_only:
        return

    c = TINY
    gen = torch.Generator().manual_seed(1234)
    sd = collections.OrderedDict()
    for k, s in official_keys(c):
        t = torch.randn(*s, generator=gen) * 0.3
        if k.endswith(".logs"):
            t = t * 0.3
        if k.endswith(".gamma"):
            t = 1 + t
        if k.endswith("flows.1.weight") or k.endswith("flows.4.weight"):
            q, _ = torch.linalg.qr(torch.randn(*s, generator=gen, dtype=torch.float64))
            if torch.det(q) < 0:
                q[:, 0] = -q[:, 0]
            t = (q + 0.1 * torch.randn(*s, generator=gen, dtype=torch.float64)).float()
        sd[k] = t
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("encoder", {"version": 1})])
    ckpt = {"model": sd, "iteration": 7, "learning_rate": 1.0,
            "optimizer": {"state": {}, "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.98), "eps": 1e-9, "params": list(range(len(sd)))}]}}
    torch.save(ckpt, os.path.join(out_dir, "tiny_official_checkpoint.pt"))
    # the same in torch's legacy (pre-1.6) format, which older official checkpoints use
    torch.save(ckpt, os.path.join(out_dir, "tiny_official_checkpoint_legacy.pt"), _use_new_zipfile_serialization=False)

    w = {k: v.double() for k, v in sd.items()}
    tokens = torch.tensor([[1, 4, 2, 7, 3, 9], [5, 10, 2, 6, 0, 0]])
    x_lengths = torch.tensor([6, 4])
    mel = torch.randn(2, c["out_channels"], 17, generator=gen, dtype=torch.float64)
    mel_lengths = torch.tensor([17, 11])
    speakers = torch.tensor([2, 0])
    T = (mel.shape[2] // c["n_sqz"]) * c["n_sqz"]
    y = mel[:, :, :T]
    y_lengths = (mel_lengths // c["n_sqz"]) * c["n_sqz"]
    y_mask = (torch.arange(T)[None, :] < y_lengths[:, None]).double()[:, None, :]
    g = F.normalize(w["emb_g.weight"][speakers]).unsqueeze(-1)
    x_m, x_logs, logw, x_mask = encoder(tokens, x_lengths, g, w, c)
    z, logdet = decoder(y * y_mask, y_mask, g, w, c)
    logp = log_likelihood_matrix(x_m, x_logs, z)
    ref = {"tokens": tokens, "x_lengths": x_lengths, "mel": mel, "mel_lengths": mel_lengths,
           "speakers": speakers, "x_m": x_m, "x_logs": x_logs, "logw": logw, "z": z, "logdet": logdet,
           "logp": logp, "y_lengths": y_lengths}
    torch.save(ref, os.path.join(out_dir, "tiny_reference.pt"))
    print("tiny:", sum(v.numel() for v in sd.values()), "parameters; logdet", logdet.tolist())


if __name__ == "__main__":
    main()

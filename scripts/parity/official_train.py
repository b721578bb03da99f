#!/usr/bin/env python3
"""Train the official Glow-TTS (jaywalnut310/glow-tts, fetched into a folder outside the project)
the way its init.py + train.py do, on one GPU, for the parity benchmark.

What follows the official code, step by step (its modules are imported, not copied):
- torch.manual_seed(seed); TextMelLoader (its front-end and its fixed shuffle) and TextMelCollate;
  the training order of train.py: a DistributedSampler with shuffle over one replica, set_epoch
  per epoch, drop_last batches.
- Data-dependent initialisation as init.py: a model with set_ddi(True) on its flows runs one
  forward pass on the first batch of a shuffled loader; train.py then seeds again, builds a fresh
  model and loads those weights (so its random stream is train.py's).
- commons.Adam (noam schedule), commons.mle_loss + commons.duration_loss, backward,
  commons.clip_grad_value_(params, 5), step; every log_interval steps train.py synthesises one
  utterance from the batch (gen=True, train mode), which this does too (--no-log-sample: off).
What differs, because train.py cannot run as it is here:
- train.py imports apex (amp O1 for fp16, apex DDP). --precision fp16 uses PyTorch's native
  autocast(float16) + GradScaler instead (unscale before the clip); tf32 and fp32 need neither.
- One process, no DDP wrapper (one GPU); no TensorBoard writer; checkpoints at --save-every steps
  (utils.save_checkpoint's dict) instead of once per epoch, with the training time so far.
- --resume goes on from the last save (the batch within the epoch, the learning-rate step, the
  loss scale, the random state), so that a run longer than one device call goes on in the next.
  Not bit-identical to a run that never stopped: the resumed epoch's loader draws its seeds and
  mel noise anew (after 8 of 16 steps on CPU the weights differed by 2e-3), as after the official
  train.py's own resume, which restarts at an epoch boundary. Resumed runs say so in train.log.

Output in --out: G_<step>.pth (official checkpoint dicts), progress.jsonl ({"step", "train_s",
"loss", "mle", "duration"} per saved step; train_s excludes DDI, checkpoint writing and the time
lost to a stop), resume.pt (what --resume needs, beside the last G_<step>.pth) and train.log.
"""
import argparse
import json
import os
import sys
import time

from hparams import load_hparams


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--official", required=True, help="the official glow-tts source folder")
    p.add_argument("--config", required=True, help="official-format JSON config (train/data/model)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--save-every", type=int, required=True)
    p.add_argument("--precision", choices=["tf32", "fp32", "fp16"], default="tf32")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--no-log-sample", action="store_true")
    p.add_argument("--resume", action="store_true", help="go on from --out's resume.pt if there is one")
    return p.parse_args()



def main():
    args = parse_args()
    sys.path.insert(0, os.path.abspath(args.official))
    import torch
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    import commons
    import models
    from data_utils import TextMelCollate, TextMelLoader
    from text.symbols import symbols

    hps = load_hparams(args.config)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train.log"), "a")
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32

    n_vocab = len(symbols) + getattr(hps.data, "add_blank", False)
    collate = TextMelCollate(1)

    def new_model(ddi=False):
        cls = models.FlowGenerator
        model = cls(n_vocab=n_vocab, out_channels=hps.data.n_mel_channels, **hps.model).to(device)
        if ddi:
            for flow in model.decoder.flows:
                if getattr(flow, "set_ddi", False):
                    flow.set_ddi(True)
        return model

    def to_device(batch):
        return [t.to(device, non_blocking=True) for t in batch]

    resume_path = os.path.join(args.out, "resume.pt")
    resume = torch.load(resume_path, map_location="cpu", weights_only=False) \
        if args.resume and os.path.exists(resume_path) else None

    # init.py: seed, dataset, a shuffled loader, one DDI forward pass.
    torch.manual_seed(args.seed)
    ddi_state = None
    if hps.train.ddi and resume is None:
        dataset = TextMelLoader(hps.data.training_files, hps.data)
        loader = DataLoader(dataset, num_workers=args.workers, shuffle=True, batch_size=hps.train.batch_size,
                            pin_memory=cuda, drop_last=True, collate_fn=collate)
        model = new_model(ddi=True)
        model.train()
        x, x_lengths, y, y_lengths = to_device(next(iter(loader)))
        model(x, x_lengths, y, y_lengths, gen=False)
        ddi_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        del model, loader, dataset

    # train.py: seed again, datasets, sampler, model (then the DDI weights), optimizer.
    torch.manual_seed(args.seed)
    dataset = TextMelLoader(hps.data.training_files, hps.data)
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True)
    loader = DataLoader(dataset, num_workers=args.workers, shuffle=False, batch_size=hps.train.batch_size,
                        pin_memory=cuda, drop_last=True, collate_fn=collate, sampler=sampler)
    generator = new_model()
    if ddi_state is not None:
        generator.load_state_dict(ddi_state)
    optimizer = commons.Adam(generator.parameters(), scheduler=hps.train.scheduler,
                             dim_model=hps.model.hidden_channels, warmup_steps=hps.train.warmup_steps,
                             lr=hps.train.learning_rate, betas=hps.train.betas, eps=hps.train.eps)
    scaler = torch.amp.GradScaler("cuda") if args.precision == "fp16" else None

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    step, epoch, train_s, skip = 0, 1, 0.0, 0
    if resume is not None:
        last = torch.load(os.path.join(args.out, f"G_{resume['step']}.pth"), map_location=device, weights_only=False)
        generator.load_state_dict(last["model"])
        optimizer.load_state_dict(last["optimizer"])
        optimizer.step_num, optimizer.cur_lr = resume["step_num"], resume["cur_lr"]
        if scaler is not None:
            scaler.load_state_dict(resume["scaler"])
        torch.set_rng_state(resume["rng"])
        if cuda:
            torch.cuda.set_rng_state(resume["cuda_rng"], device)
        step, epoch, train_s, skip = resume["step"], resume["epoch"], resume["train_s"], resume["next_batch"]
        print(f"resumed at step {step} (epoch {epoch}, batch {skip}, {train_s:.1f} s trained)", file=log, flush=True)
    progress = open(os.path.join(args.out, "progress.jsonl"), "a" if resume is not None else "w")
    sync()
    t0 = time.perf_counter()
    generator.train()
    while step < args.steps:
        sampler.set_epoch(epoch)
        for batch_idx, batch in enumerate(loader):
            if batch_idx < skip:  # a resumed epoch: the batches trained before the stop
                continue
            x, x_lengths, y, y_lengths = to_device(batch)
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
                (z, z_m, z_logs, logdet, z_mask), _, (attn, logw, logw_) = generator(
                    x, x_lengths, y, y_lengths, gen=False)
                l_mle = commons.mle_loss(z, z_m, z_logs, logdet, z_mask)
                l_length = commons.duration_loss(logw, logw_, x_lengths)
                loss = l_mle + l_length
            if scaler is None:
                loss.backward()
                commons.clip_grad_value_(generator.parameters(), 5)
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer._optim)
                commons.clip_grad_value_(generator.parameters(), 5)
                scaler.step(optimizer._optim)
                scaler.update()
                optimizer._update_learning_rate()
            if batch_idx % hps.train.log_interval == 0:
                if not args.no_log_sample:
                    with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
                        generator(x[:1], x_lengths[:1], gen=True)
                print(f"step {step} epoch {epoch} loss {loss.item():.5f} mle {l_mle.item():.5f} "
                      f"duration {l_length.item():.5f} lr {optimizer.get_lr():.3e}", file=log, flush=True)
            step += 1
            if step % args.save_every == 0 or step == args.steps:
                sync()
                train_s += time.perf_counter() - t0
                torch.save({"model": generator.state_dict(), "iteration": step, "optimizer": optimizer.state_dict(),
                            "learning_rate": hps.train.learning_rate}, os.path.join(args.out, f"G_{step}.pth"))
                progress.write(json.dumps({"step": step, "train_s": round(train_s, 3), "loss": loss.item(),
                                           "mle": l_mle.item(), "duration": l_length.item()}) + "\n")
                progress.flush()
                state = {"step": step, "epoch": epoch, "next_batch": batch_idx + 1, "train_s": train_s,
                         "step_num": optimizer.step_num, "cur_lr": optimizer.cur_lr, "rng": torch.get_rng_state(),
                         "cuda_rng": torch.cuda.get_rng_state(device) if cuda else None,
                         "scaler": scaler.state_dict() if scaler is not None else None}
                torch.save(state, resume_path + ".tmp")
                os.replace(resume_path + ".tmp", resume_path)
                sync()
                t0 = time.perf_counter()
            if step >= args.steps:
                break
        epoch += 1
        skip = 0
    print(f"official_train: {step} steps in {train_s:.1f} s ({1000 * train_s / max(step, 1):.1f} ms/step), "
          f"{args.precision}, seed {args.seed}", flush=True)


if __name__ == "__main__":
    main()

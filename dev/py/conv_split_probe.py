# Probe: the decoder's k=5 weight gradient ([B, 192, 1, T] channels-last, 192 -> 384) computed
# whole, against the same sum over batch chunks (n wgrads of B/n items, added), replayed from a
# CUDA graph with cuDNN's benchmark mode on, by length T and dtype; and the same wgrad with time
# folded into the batch: each item cut into f pieces of T/f frames, x copied with its 2-frame
# halo on each side ([B*f, C, 1, T/f + 4], unpadded convolution), gy a free view.
# Question behind it: cuDNN 9 runs this wgrad 2-4x slower in narrow length bands (bf16 around
# B x T = 16,384, TF32 at T = 384; conv_graph_probe.py). Do smaller chunks stay on the fast
# engine, and what do the extra calls and the sum cost where there is no cliff? (Answer, with the
# H100's figures: docs/history/benchmarks-2026-11.md, "the cliff cannot be decomposed away".)
import sys, torch
from cuda_timing import graphed, timed_us
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
torch.backends.cudnn.benchmark = True
conv_bwd = torch.ops.aten.convolution_backward
args = ([1, 1], [0, 2], [1, 1], False, [0, 0], 1)

B = int(sys.argv[1]) if len(sys.argv) > 1 else 32
Ts = [int(t) for t in sys.argv[2:]] or [256, 384, 448, 504, 512, 520, 576, 640, 768, 1024]
print("B,T,dtype,chunks,us,max_rel_diff")
for T in Ts:
  for dtype in (torch.float32, torch.bfloat16):
    C, K = 192, 5
    x = torch.randn(B, C, 1, T, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    w = torch.randn(2 * C, C, 1, K, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    gy = torch.randn(B, 2 * C, 1, T, device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
    whole = conv_bwd(gy, x, w, None, *args, [False, True, False])[1].float()
    for n in (1, 2, 4):
      def wgrad(n=n):
        parts = [conv_bwd(g, xi, w, None, *args, [False, True, False])[1] for g, xi in zip(gy.chunk(n), x.chunk(n))]
        return parts[0] if n == 1 else torch.stack(parts).sum(0, dtype=torch.float32).to(dtype)
      diff = ((wgrad().float() - whole).abs().max() / whole.abs().max()).item()
      print(f"{B},{T},{str(dtype)[6:]},{n},{timed_us(graphed(wgrad)):.1f},{diff:.2e}", flush=True)
    xp = torch.nn.functional.pad(x, (2, 2))  # [B, C, 1, T + 4]
    for f in (2, 4):
      if T % f: continue
      piece = T // f
      def folded(f=f, piece=piece):
        xs = xp.unfold(3, piece + 4, piece)  # [B, C, 1, f, piece + 4]
        xf = xs.permute(0, 3, 1, 2, 4).reshape(B * f, C, 1, piece + 4).contiguous(memory_format=torch.channels_last)
        gf = gy.permute(0, 3, 2, 1).reshape(B * f, piece, 1, 2 * C).permute(0, 3, 2, 1)
        return conv_bwd(gf, xf, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, False])[1]
      diff = ((folded().float() - whole).abs().max() / whole.abs().max()).item()
      print(f"{B},{T},{str(dtype)[6:]},fold{f},{timed_us(graphed(folded)):.1f},{diff:.2e}", flush=True)

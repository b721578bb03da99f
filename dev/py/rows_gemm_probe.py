# Probe: the decoder's 1x1 products as the training step runs them (rows [N, C_in] of the
# channels-last WN activations times a [C_in, C_out] weight: res_skip 192 -> 384, the last
# res_skip 192 -> 192, start 80 -> 192 / 160 -> 192, end 192 -> 160), forward and both backward
# products, in TF32 and bf16, through PyTorch's default BLAS (cuBLAS) and through cuBLASLt
# (`torch.backends.cuda.preferred_blas_library("cublaslt")`; the C++ frontend's
# `at::globalContext().setBlasPreferredBackend(at::BlasBackend::Cublaslt)`).
# Why: in the TF32 profile (docs/benchmarks.md, H100, 133e3a4) the backward products ran
# cuBLAS's sm80 CUTLASS TF32 kernels (`Kernel2<cutlass_80_tensorop_s1688gemm_...>`, 1.85 + 0.56
# ms a step, ~19 us a call, about half of HBM bandwidth), where the forward product got an sm90
# kernel and bf16 gets sm90 ones both ways. The question: does another operand layout or
# cuBLASLt pick faster kernels for the same products?
# Prints per shape, precision and library: kernel time of each product (the profiler's, mean
# of 20 calls after 5) and the kernel's name; and checks that the libraries agree.
#   python3 dev/py/rows_gemm_probe.py [N]
import sys

import torch

from cuda_timing import cuda_kernels

N = int(sys.argv[1]) if len(sys.argv) > 1 else 32 * 500  # B * squeezed frames
SHAPES = [(192, 384), (192, 192), (160, 192), (192, 160)]  # (C_in, C_out)
CALLS = 20


def products(rows, w, g):
    """The three products of rows @ w with output gradient g: forward, d rows, d w (as autograd
    computes them for torch.mm), each as its own closure."""
    return {
        "forward rows @ w": lambda: rows.mm(w),
        "d rows = g @ w.T": lambda: g.mm(w.t()),
        "d w = rows.T @ g": lambda: rows.t().mm(g),
        "d w as (g.T @ rows).T": lambda: g.t().mm(rows).t(),
    }


def main():
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.manual_seed(0)
    print("N = %d; us a call (kernel time), kernel" % N)
    for dtype in (torch.float32, torch.bfloat16):
        for c_in, c_out in SHAPES:
            rows = torch.randn(N, c_in, device="cuda", dtype=dtype)
            w = torch.randn(c_in, c_out, device="cuda", dtype=dtype) * 0.05
            g = torch.randn(N, c_out, device="cuda", dtype=dtype)
            results = {}
            for library in ("cublas", "cublaslt"):
                torch.backends.cuda.preferred_blas_library(library)
                for name, f in products(rows, w, g).items():
                    kernels = cuda_kernels(f, calls=CALLS, warmup=5)
                    us = sum(k.device_time_total for k in kernels) / CALLS
                    top = max(kernels, key=lambda k: k.device_time_total).key[:70]
                    results[(library, name)] = f().float()
                    print("%-5s %3d -> %3d  %-9s %-22s %7.1f  %s" % (
                        "tf32" if dtype == torch.float32 else "bf16", c_in, c_out, library, name, us, top))
            torch.backends.cuda.preferred_blas_library("cublas")
            for name in products(rows, w, g):
                a, b = results[("cublas", name)], results[("cublaslt", name)]
                diff = ((a - b).abs().max() / a.abs().max().clamp_min(1e-12)).item()
                if diff > (5e-3 if dtype == torch.float32 else 2e-2):
                    print("  libraries disagree on %s: %.2e" % (name, diff))
    return 0


if __name__ == "__main__":
    sys.exit(main())

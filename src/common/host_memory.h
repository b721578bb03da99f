// Keeping freed host memory for the next call (glibc malloc). An inference call on the CPU
// allocates activations of a few MB each and frees them; by default glibc maps blocks over its
// dynamic threshold with mmap and returns the top of the heap to the system when it is freed, so
// every call pays page faults on fresh zeroed pages again: 14% of `bench_inference --device cpu`
// ran in the kernel, in page faults and page clearing (perf, 2 cores, docs/benchmarks.md
// "Inference"). Serving blocks up to 32 MiB (glibc's ceiling) from the heap and keeping the freed
// pages costs memory up to the peak of one call, which is held anyway while it runs.
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace monoflow {

inline void keep_freed_host_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace monoflow

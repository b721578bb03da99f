// When a graphed batch shape gets cuDNN's algorithm search (run.cudnn_search).
//
// cuDNN's benchmark mode times the candidate algorithms of every convolution of a new shape and
// keeps the fastest. On an H200 that search costs ~0.75 s a shape and makes a quick-start step
// 2.9 ms where cuDNN's heuristics give 6.9 ms (docs/benchmarks.md, "Recording the graphs"): it
// repays itself after ~200 steps of the shape. A long run sees each shape thousands of times; a
// short one (the quick-start's 1,500 steps over ~20 shapes) never repays it.
//
// `auto` decides per shape, as one rents skis until the rent would have bought them: a shape is
// first recorded with the heuristics, and recorded again with the search (and its bucket length
// measured, bucket_lengths.h) once its replays have taken as much GPU time as the last search
// cost. A shape that never repays the search costs at most twice what the best choice in
// hindsight would have. The first shape is searched at once: that measures what a search costs.
#pragma once

#include <string>

namespace monoflow::train {

enum class CudnnSearch {
  kAuto,    // per shape, once its replays have cost as much as a search
  kAlways,  // every shape at its first step (steady-state benchmarks; several ranks)
  kNever,   // cuDNN's heuristics only
};

// "auto" | "always" | "never" (run.cudnn_search); anything else throws a UserError.
CudnnSearch parse_cudnn_search(const std::string& name);

class SearchSchedule {
 public:
  explicit SearchSchedule(CudnnSearch mode) : mode_(mode) {}

  // Whether a shape whose heuristic graph has replayed for `replayed_ms` of GPU time should be
  // recorded with the search now.
  bool search_now(double replayed_ms) const;

  // A search (the warm-up in benchmark mode and the bucket-length timing) took `cost_ms`.
  void searched(double cost_ms) { last_cost_ms_ = cost_ms; }

 private:
  CudnnSearch mode_;
  double last_cost_ms_ = -1;  // < 0: no search yet
};

}  // namespace monoflow::train

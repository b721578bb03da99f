#include "train/train_graphs.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/error.h"
#include "train/bucket_lengths.h"

namespace monoflow::train {

bool TrainGraphs::wanted(bool cuda_graphs, const torch::Device& device, const StepOptions& options) {
  return cuda_graphs && device.is_cuda() && GraphedTrainStep::supported(device, options);
}

GraphBuckets TrainGraphs::buckets_for(CudnnSearch search) {
  GraphBuckets b;
  b.cudnn_search = search;
  return b;
}

TrainGraphs::TrainGraphs(models::GlowTTS model, FusedAdam& optimizer, const StepOptions& options, int64_t skipped,
                         CudnnSearch search)
    : buckets_(buckets_for(search)), graphed_(std::move(model), optimizer, options, buckets_, skipped) {}

std::string TrainGraphs::description(int64_t n_sqz) const {
  const std::vector<int64_t> extra = BucketLengthOptions().extra_frames();
  const int64_t most_extra_frames = *std::max_element(extra.begin(), extra.end()) * n_sqz;
  std::string search;
  switch (buckets_.cudnn_search) {
    case CudnnSearch::kAuto:
      search = "with cuDNN's heuristics, and again with its algorithm search once its replays have cost as much as a "
               "search (run.cudnn_search: auto)";
      break;
    case CudnnSearch::kAlways:
      search = "with cuDNN's algorithm search (run.cudnn_search: always)";
      break;
    case CudnnSearch::kNever:
      search = "with cuDNN's heuristics (run.cudnn_search: never)";
      break;
  }
  return "CUDA graphs: each batch shape (text padded to a multiple of " + std::to_string(buckets_.text_multiple) +
         " tokens, mel to " + std::to_string(buckets_.mel_multiple) + " frames, then up to " +
         std::to_string(most_extra_frames) + " more where cuDNN measures faster) is recorded " + search +
         ", then replayed";
}

std::string TrainGraphs::recording_summary() const {
  const GraphRecording r = graphed_.recording();
  const auto seconds = [](double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000.0);
    return std::string(buf);
  };
  return "CUDA graphs: " + std::to_string(r.graphs) + " recorded, " + std::to_string(r.searched) +
         " of them with cuDNN's algorithm search, in " + seconds(r.total_ms()) + " (bucket lengths measured " +
         seconds(r.lengths_ms) + ", warm-ups " + seconds(r.warm_up_ms) + ", captures " + seconds(r.capture_ms) + ")";
}

void TrainGraphs::start_readback(int64_t step, int64_t epoch) {
  graphed_.start_readback();
  readback_step_ = step;
  readback_epoch_ = epoch;
}

std::optional<TrainGraphs::Readback> TrainGraphs::finish_readback() {
  if (readback_step_ == 0) return std::nullopt;
  Readback r{readback_step_, readback_epoch_, graphed_.finish_readback()};
  readback_step_ = 0;
  return r;
}

void TrainGraphs::check_errors(const GraphStatus& s) {
  if (s.bad_lengths_step > 0) {
    throw UserError("step " + std::to_string(s.bad_lengths_step) + ": item " + std::to_string(s.bad_lengths_item) +
                    " of the batch has more text tokens than mel frames (MAS found no monotonic alignment); "
                    "check the dataset's lengths");
  }
  TORCH_CHECK(s.timeout_step == 0, "step ", s.timeout_step, ": the cuda-fast MAS hand-over between warps timed out");
}

}  // namespace monoflow::train

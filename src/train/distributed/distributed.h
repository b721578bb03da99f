// Data-parallel training over PyTorch's c10d: NCCL between GPUs, Gloo between CPU processes.
// One process per device; ranks meet through a TCPStore at MASTER_ADDR:MASTER_PORT. The
// environment variables are torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT), so scripts/launch.sh and torchrun --no-python both start it.
//
// Two channels: gradients travel through the data group (NCCL on GPUs), while the host's
// per-step decisions (stop now? which padded shape?) travel through a Gloo control group on
// CPU tensors, so that agreeing on them never waits for the GPU's queue to drain. On CPU
// the two are one Gloo group.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace monoflow::train {

struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string backend = "auto";  // auto (nccl on CUDA devices, gloo on CPU) | nccl | gloo
};

// Reads torchrun's variables; world_size 1 when they are absent. Bad values: UserError.
DistributedOptions distributed_options_from_env();

// Whether this build can make a process group of the given backend ("nccl" / "gloo").
bool distributed_backend_available(const std::string& backend);

class Distributed {
 public:
  // world_size 1 makes a no-op group (every call returns at once). `device` picks the
  // backend under "auto" and is where collective buffers live.
  Distributed(const DistributedOptions& options, torch::Device device);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  bool is_main() const { return options_.rank == 0; }
  const std::string& backend() const { return backend_; }

  // Copies rank 0's values into every rank's tensors (parameters and buffers after init/DDI).
  void broadcast(const std::vector<torch::Tensor>& tensors);
  // Rank 0's parameters and buffers of `module` into every rank's (after init and after DDI).
  void broadcast_module(const torch::nn::Module& module);
  // Replaces each defined gradient by its mean over ranks: one flat all-reduce per dtype.
  void average_gradients(const std::vector<torch::Tensor>& parameters);
  // Starts summing `flat` over ranks, in place; the returned function waits for the result
  // (for GradientReducer, which overlaps the sums with backward). On NCCL the sum runs on the
  // group's stream after the current one, and waiting makes the current stream wait for it:
  // under a CUDA graph capture both waits become graph edges (as PyTorch's DDP does there).
  std::function<void()> start_sum(torch::Tensor flat);
  // Host scalars through the control group (no GPU involved).
  double average(double value);             // mean over ranks (for logging losses)
  bool any_rank(bool flag);                 // whether some rank's flag is set
  std::vector<int64_t> max_over_ranks(std::vector<int64_t> values);  // elementwise, over ranks
  void barrier();

 private:
  struct Group;
  DistributedOptions options_;
  std::string backend_;
  torch::Device device_;
  std::unique_ptr<Group> group_;
};

}  // namespace monoflow::train

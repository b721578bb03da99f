#include "train/distributed/distributed.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef MONOFLOW_HAS_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef MONOFLOW_HAS_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <map>

#include "common/error.h"

namespace monoflow::train {
namespace {

int env_int(const char* name, int fallback, int min_value) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < min_value)
    throw UserError(std::string("environment variable ") + name + "='" + text +
                    "': expected an integer >= " + std::to_string(min_value));
  return static_cast<int>(v);
}

}  // namespace

DistributedOptions distributed_options_from_env() {
  DistributedOptions o;
  o.world_size = env_int("WORLD_SIZE", 1, 1);
  o.rank = env_int("RANK", 0, 0);
  o.local_rank = env_int("LOCAL_RANK", o.rank, 0);
  o.master_port = env_int("MASTER_PORT", o.master_port, 1);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr && *addr) o.master_addr = addr;
  if (o.rank >= o.world_size)
    throw UserError("RANK=" + std::to_string(o.rank) + " must be below WORLD_SIZE=" +
                    std::to_string(o.world_size));
  return o;
}

bool distributed_backend_available(const std::string& backend) {
#ifdef MONOFLOW_HAS_GLOO
  if (backend == "gloo") return true;
#endif
#ifdef MONOFLOW_HAS_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

struct Distributed::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
};

Distributed::Distributed(const DistributedOptions& options, torch::Device device)
    : options_(options), device_(device) {
  backend_ = options.backend == "auto" ? (device.is_cuda() ? "nccl" : "gloo") : options.backend;
  if (options_.world_size == 1) return;
  if (!distributed_backend_available(backend_))
    throw UserError("distributed backend '" + backend_ + "' is not compiled into this build");

  auto group = std::make_unique<Group>();
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(options_.master_port);
  store_options.isServer = options_.rank == 0;
  store_options.numWorkers = options_.world_size;
  group->store = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, store_options);
#ifdef MONOFLOW_HAS_GLOO
  if (backend_ == "gloo") {
    auto gloo = c10d::ProcessGroupGloo::Options::create();
    gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options_.master_addr));
    group->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(group->store, options_.rank,
                                                                  options_.world_size, gloo);
  }
#endif
#ifdef MONOFLOW_HAS_NCCL
  if (backend_ == "nccl") {
    TORCH_CHECK(device.is_cuda(), "the nccl backend needs a CUDA device");
    c10::cuda::set_device(device.index());  // NCCL binds its communicator to the current device
    group->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(group->store, options_.rank,
                                                                  options_.world_size);
  }
#endif
  group_ = std::move(group);
}

Distributed::~Distributed() = default;

void Distributed::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  for (const auto& t : tensors) {
    std::vector<at::Tensor> one{t.is_contiguous() ? t : t.contiguous()};
    group_->backend->broadcast(one)->wait();
    if (!t.is_contiguous()) t.copy_(one[0]);
  }
}

void Distributed::average_gradients(const std::vector<torch::Tensor>& parameters) {
  if (!group_) return;
  torch::NoGradGuard no_grad;
  // One flat buffer per dtype: a single large all-reduce instead of hundreds of small ones.
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_dtype;
  for (const auto& p : parameters)
    if (p.grad().defined()) by_dtype[p.grad().scalar_type()].push_back(p.grad());
  for (auto& [dtype, grads] : by_dtype) {
    std::vector<torch::Tensor> flat_views;
    for (const auto& g : grads) flat_views.push_back(g.reshape(-1));
    torch::Tensor buffer = torch::cat(flat_views);
    start_sum(buffer)();
    buffer.div_(options_.world_size);
    int64_t offset = 0;
    for (auto& g : grads) {
      g.copy_(buffer.narrow(0, offset, g.numel()).view_as(g));
      offset += g.numel();
    }
  }
}

std::function<void()> Distributed::start_sum(torch::Tensor flat) {
  if (!group_) return [] {};
  std::vector<at::Tensor> buffer{std::move(flat)};
  c10d::AllreduceOptions sum;
  sum.reduceOp = c10d::ReduceOp::SUM;
  c10::intrusive_ptr<c10d::Work> work = group_->backend->allreduce(buffer, sum);
  return [work] { work->wait(); };
}

double Distributed::average(double value) {
  if (!group_) return value;
  std::vector<at::Tensor> one{torch::tensor({value}, torch::dtype(torch::kFloat64).device(device_))};
  group_->backend->allreduce(one)->wait();
  return one[0].item<double>() / options_.world_size;
}

void Distributed::barrier() {
  if (!group_) return;
  group_->backend->barrier()->wait();
}

}  // namespace monoflow::train

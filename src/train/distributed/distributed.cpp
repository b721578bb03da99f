#include "train/distributed/distributed.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
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
  c10::intrusive_ptr<c10d::Backend> backend;  // gradients, broadcasts (NCCL on GPUs)
  c10::intrusive_ptr<c10d::Backend> control;  // host scalars on CPU tensors (Gloo)
  bool control_on_device = false;              // no Gloo in this build: control is the NCCL group
};

#ifdef MONOFLOW_HAS_GLOO
namespace {
c10::intrusive_ptr<c10d::Backend> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                            const DistributedOptions& o) {
  auto gloo = c10d::ProcessGroupGloo::Options::create();
  gloo->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o.master_addr));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, o.rank, o.world_size, gloo);
}
}  // namespace
#endif

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
  if (backend_ == "gloo") group->backend = make_gloo(group->store, options_);
#endif
#ifdef MONOFLOW_HAS_NCCL
  if (backend_ == "nccl") {
    TORCH_CHECK(device.is_cuda(), "the nccl backend needs a CUDA device");
    c10::cuda::set_device(device.index());  // NCCL binds its communicator to the current device
    group->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(group->store, options_.rank,
                                                                  options_.world_size);
  }
#endif
  group->control = group->backend;
  group->control_on_device = backend_ != "gloo";
#ifdef MONOFLOW_HAS_GLOO
  // Its own key space in the store, beside the data group's.
  if (backend_ != "gloo") {
    group->control = make_gloo(c10::make_intrusive<c10d::PrefixStore>("control", group->store), options_);
    group->control_on_device = false;
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

void Distributed::broadcast_module(const torch::nn::Module& module) {
  if (!group_) return;
  std::vector<torch::Tensor> tensors;
  for (const auto& p : module.parameters()) tensors.push_back(p.data());
  for (const auto& b : module.buffers()) tensors.push_back(b);
  broadcast(tensors);
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

namespace {
// One collective of the control group on a host tensor. A control group on NCCL (a build
// without Gloo) gets the tensor on `device` and back.
torch::Tensor reduce_on_host(c10d::Backend& control, torch::Tensor values, c10d::ReduceOp op,
                             const torch::Device& device, bool on_device) {
  std::vector<at::Tensor> one{on_device ? values.to(device) : values};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  control.allreduce(one, o)->wait();
  return one[0].to(torch::kCPU);
}
}  // namespace

double Distributed::average(double value) {
  if (!group_) return value;
  const torch::Tensor sum = reduce_on_host(*group_->control, torch::tensor({value}, torch::kFloat64),
                                           c10d::ReduceOp::SUM, device_, group_->control_on_device);
  return sum.item<double>() / options_.world_size;
}

bool Distributed::any_rank(bool flag) {
  if (!group_) return flag;
  return max_over_ranks({flag ? 1 : 0}).front() > 0;
}

std::vector<int64_t> Distributed::max_over_ranks(std::vector<int64_t> values) {
  if (!group_ || values.empty()) return values;
  const torch::Tensor host = torch::tensor(values, torch::kInt64);
  const torch::Tensor got =
      reduce_on_host(*group_->control, host, c10d::ReduceOp::MAX, device_, group_->control_on_device);
  const int64_t* v = got.data_ptr<int64_t>();
  return std::vector<int64_t>(v, v + got.numel());
}

void Distributed::barrier() {
  if (!group_) return;
  group_->backend->barrier()->wait();
}

}  // namespace monoflow::train

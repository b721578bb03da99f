// Fuzzes the checkpoint reader (train/checkpoint.h) as train --resume and synthesize use it:
// read the state, load into a model and a FusedAdam, and take an optimizer step with what
// was accepted (the fused kernel walks the moments with the parameters' sizes). Raw byte
// damage (caught by the CRCs) and damage behind valid CRCs (archive_mutation.h) alike must be
// a FileError naming the file.
#include <filesystem>

#include "archive_mutation.h"
#include "fuzz_driver.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "zip_edit.h"

using namespace monoflow;

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc = register_module("fc", torch::nn::Linear(4, 3));
    conv = register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(2, 2, 3)));
    window = register_buffer("window", torch::arange(13, torch::kFloat32).narrow(0, 5, 3));  // a view: offset 5
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc->forward(x).sum() + conv->forward(x.view({1, 2, 2}).repeat({1, 1, 2})).sum();
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::Conv1d conv{nullptr};
  torch::Tensor window;
};
TORCH_MODULE(Net);

std::string dir() {
  static const std::string d = fuzz::temp_dir("fuzz_checkpoint");
  return d;
}

torch::optim::AdamOptions adam(bool amsgrad = false) { return torch::optim::AdamOptions(1e-3).amsgrad(amsgrad); }

// A checkpoint after one step; `tamper` may change the optimizer's state before the save.
std::string checkpoint(bool amsgrad, const std::function<void(Net&, train::FusedAdam&)>& tamper = {}) {
  torch::manual_seed(3);
  Net net;
  train::FusedAdam opt(net->parameters(), adam(amsgrad));
  opt.zero_grad();
  net->forward(torch::randn({4})).backward();
  opt.step();
  if (tamper) tamper(net, opt);
  train::CheckpointState s;
  s.step = 1;
  s.scheduler = "noam";
  s.loader_position = "0 1";
  s.config_yaml = "train: {}\n";
  s.run_id = "0123456789abcdef";
  s.rng = train::capture_rng();
  const std::string path = dir() + "/seed.pt";
  train::save_checkpoint(path, *net, opt, s);
  return fuzz::read_bytes(path);
}

torch::optim::AdamParamState& state_of(train::FusedAdam& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamParamState&>(*opt.state().at(p.unsafeGetTensorImpl()));
}

void run(const std::string& input) {
  const std::string path = dir() + "/" + train::checkpoint_filename(7);
  fuzz::write_bytes(path, input);
  train::checkpoint_run_id(path);  // never throws
  train::read_checkpoint_state(path);
  train::read_checkpoint_weights(path);
  for (bool amsgrad : {false, true}) {
    Net net;
    train::FusedAdam opt(net->parameters(), adam(amsgrad));
    train::load_checkpoint(path, *net, &opt);
    // What was accepted must train: one step over every parameter.
    for (auto& p : net->parameters()) p.mutable_grad() = torch::ones_like(p);
    opt.step();
  }
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_checkpoint";
  t.seeds = {checkpoint(false), checkpoint(true)};
  t.valid_seeds = t.seeds.size();
  // Optimizer state that does not fit its parameter (shape, dtype, layout), and the pickle's
  // statements out of bounds behind valid CRCs: a storage offset past the end, a storage
  // declared larger than its record (issue #13).
  t.seeds.push_back(checkpoint(false, [](Net& n, train::FusedAdam& o) { state_of(o, n->fc->weight).exp_avg(torch::zeros({1})); }));
  t.seeds.push_back(checkpoint(false, [](Net& n, train::FusedAdam& o) {
    state_of(o, n->fc->weight).exp_avg(torch::zeros({4, 3}).t());
  }));
  t.seeds.push_back(checkpoint(false, [](Net& n, train::FusedAdam& o) {
    state_of(o, n->fc->bias).exp_avg_sq(torch::zeros({3}, torch::kFloat64));
  }));
  const std::string good = t.seeds[0];
  t.seeds.push_back(train::testing::replace_in_pickle(good, std::string("K\x05(K\x03t", 6), train::testing::binint(1000000) + "(K\x03t"));
  t.seeds.push_back(train::testing::replace_in_pickle(good, "K\x0dtQ", train::testing::binint(1000000) + "tQ"));
  fuzz::mutate_as_pickle_archive(t);
  t.run = run;
  t.fixed_cases = fuzz::unreadable_path_cases([](const std::string& path) { train::read_checkpoint_state(path); },
                                              dir, "missing.pt", "checkpoint");
  return fuzz::fuzz_main(argc, argv, t);
}

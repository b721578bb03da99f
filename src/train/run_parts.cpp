#include "train/run_parts.h"

#include <cstdio>
#include <string>

#include "common/error.h"
#include "models/text_side_precision.h"
#include "train/config/options_map.h"
#include "train/precision.h"
#include "train/resume_check.h"

namespace monoflow::train {

void choose_devices(const Config& c, RunParts& p) {
  p.device = c.train.use_cuda ? resolve_device(c.run.device)
                              : (c.run.device == "auto" ? torch::Device(torch::kCPU) : resolve_device(c.run.device));
  const DistributedOptions dist_options = distributed_options_from_env();
  if (dist_options.world_size > 1 && p.device.is_cuda()) {
    // One GPU per process: rank r of this host trains on cuda:LOCAL_RANK.
    if (dist_options.local_rank >= static_cast<int>(torch::cuda::device_count())) {
      throw UserError("LOCAL_RANK=" + std::to_string(dist_options.local_rank) + " but only " +
                      std::to_string(torch::cuda::device_count()) +
                      " GPU(s) are visible; start at most that many processes");
    }
    p.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist_options.local_rank));
  }
  p.dist = std::make_unique<Distributed>(dist_options, p.device);
  p.main = p.dist->is_main();
  set_allow_tf32(c.train.allow_tf32);
  models::set_text_side_autocast(c.train.autocast_text_side);
  p.bf16 = c.train.fp16_run && p.device.is_cuda();
  p.backend = resolve_backend(c.run.align_backend, p.device);
}

void build_data_and_model(const Config& c, RunParts& p) {
  p.text = std::make_unique<text::TextProcessor>(c.text);
  const text::TextProcessor* tp = p.text.get();
  p.datasets = data::load_datasets(data_options(c), [tp](const std::string& s) { return tp->encode(s); });
  // Characters the symbol set lacks were dropped while encoding: say so once, with counts.
  if (const std::string unknown = tp->unknown_report(); !unknown.empty())
    std::fprintf(stderr, "warning: %s\n", unknown.c_str());
  if (!p.datasets.train || p.datasets.train->size() == 0) {
    throw UserError(c.source + ": no training utterances (data.dataset_dir / data.training_files); "
                    "check the dataset path");
  }
  // Every rank draws from the same (seed, epoch) batch list and takes batches r, r + W, ...
  auto lo = loader_options(c, true);
  lo.rank = p.dist->rank();
  lo.world_size = p.dist->world_size();
  p.dataset_identity = dataset_identity(*p.datasets.train, p.datasets.validation.get());
  p.loader = std::make_unique<data::DataLoader>(p.datasets.train, lo);
  if (p.datasets.validation && p.datasets.validation->size() > 0) {
    auto vo = loader_options(c, false);
    vo.num_workers = 0;
    p.val_loader = std::make_unique<data::DataLoader>(p.datasets.validation, vo);
  }

  torch::manual_seed(static_cast<uint64_t>(c.train.seed));
  p.model = models::GlowTTS(model_options(c, static_cast<int64_t>(p.text->vocab_size())));
  p.model->to(p.device);
  p.model->train();
  p.optimizer = std::make_unique<FusedAdam>(p.model->parameters(), torch::optim::AdamOptions(c.train.learning_rate)
                                                                       .betas({c.train.betas[0], c.train.betas[1]})
                                                                       .eps(c.train.eps));
  p.schedule = std::make_unique<LrSchedule>(c.train.scheduler, c.train.learning_rate, c.model.hidden_channels(),
                                            c.train.warmup_steps);

  p.step_options.mas.backend = p.backend;
  p.step_options.mas.neg_inf = static_cast<float>(c.run.mas_neg_inf);
  p.step_options.grad_clip_value = c.train.grad_clip_value;
  p.step_options.bf16 = p.bf16;
  p.step_options.check_finite = true;
  p.step_options.distributed = p.dist.get();
  if (p.dist->world_size() > 1) {
    p.reducer = std::make_unique<GradientReducer>(*p.dist, p.model->parameters());
    p.step_options.reducer = p.reducer.get();
  }
}

std::string describe_run(const Config& c, const RunParts& p, const std::string& dir, bool graphs,
                         const std::string& threads) {
  std::string line = "training on " + p.device.str() + " with MAS backend " + align::backend_name(p.backend) +
                     (p.bf16 ? ", bf16 autocast" : "") + (c.run.compare_align ? ", comparing all MAS backends" : "") +
                     "; " + std::to_string(p.datasets.train->size()) + " training utterances, " +
                     std::to_string(p.loader->batches_per_epoch()) + " batches per epoch; " +
                     std::to_string(p.model->parameter_count()) + " parameters; " + threads +
                     " intra-op threads; run directory " + dir;
  if (p.dist->world_size() == 1) return line;
  return line + "; " + std::to_string(p.dist->world_size()) + " processes (" + p.dist->backend() + "), batch_size " +
         std::to_string(c.train.batch_size) + " each, gradients averaged " +
         (graphs ? std::string("inside each step's CUDA graph")
                 : "in " + std::to_string(p.reducer->buckets()) + " buckets during backward");
}

}  // namespace monoflow::train

#include "train/inspect_step.h"

#include "checkpoint/commit.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "model/gpt.h"
#include "model/moe/moe_ffn.h"
#include "optim/optimizer.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

namespace {
constexpr const char* kOutputFiles[] = {"weights.safetensors", "batch.safetensors",
                                        "grads.safetensors", "updated.safetensors", "step.json"};

// Creates out_dir and checks that every output file can be written, so a bad --out is
// refused up front with the operating system's reason, not as a raw filesystem error
// halfway through.
void prepare_output_dir(const std::filesystem::path& out_dir) {
  namespace fs = std::filesystem;
  auto refuse = [&](const fs::path& path, const std::string& why) {
    throw InputError("--out " + out_dir.string() + ": " +
                     (path == out_dir ? std::string() : path.string() + ": ") + why +
                     "; give --out a directory you can write (it is created if missing)");
  };
  std::error_code ec;
  const fs::file_status status = fs::status(out_dir, ec);
  if (fs::exists(status) && !fs::is_directory(status)) {
    refuse(out_dir, "exists and is not a directory");
  }
  fs::create_directories(out_dir, ec);
  if (ec) refuse(out_dir, "cannot create it: " + ec.message());
  if (::access(out_dir.c_str(), W_OK) != 0) refuse(out_dir, std::strerror(errno));
  for (const char* name : kOutputFiles) {
    const fs::path file = out_dir / name;
    const fs::file_status s = fs::symlink_status(file, ec);
    if (!fs::exists(s)) continue;
    if (!fs::is_regular_file(s)) refuse(file, "exists and is not a regular file");
    if (::access(file.c_str(), W_OK) != 0) refuse(file, std::strerror(errno));
  }
}

std::vector<checkpoint::NamedTensor> views(const model::ParameterSet& p, bool grads) {
  std::vector<checkpoint::NamedTensor> out;
  for (size_t i = 0; i < p.list().size(); ++i) {
    out.push_back({p.at(i).name, Tensor::borrow(grads ? p.grad(i) : p.data(i), p.at(i).shape)});
  }
  return out;
}
}  // namespace

void inspect_step(const config::JobSpec& spec, const std::filesystem::path& out_dir,
                  const std::optional<std::filesystem::path>& from) {
  prepare_output_dir(out_dir);
  const RunOptions options = run_options(spec);
  const int T = options.model.seq_len, mb = options.model.micro_batch_size;
  auto backend = ops::make_cpu_backend(options.backend);
  const model::ModelConfig& cfg = options.model.config;
  model::Gpt gpt(cfg, *backend, mb, T);
  gpt.init_weights(options.seed);
  if (from) {
    checkpoint::CheckpointReader reader(checkpoint::resolve_checkpoint(*from));
    model::ParameterSet& params = gpt.params();
    for (const model::Param& p : params.list()) {
      reader.read_slice(p.name, p.shard, params.data() + p.offset);
    }
    // balance: bias: the routing of the checkpoint's model includes its expert biases.
    for (const model::MoeLayer& l : gpt.moe_layers()) {
      std::vector<float>& bias = l.ffn->expert_bias();
      if (bias.empty() || !reader.contains(l.ffn->expert_bias_name())) continue;
      model::TensorShard whole;
      whole.global_shape = {static_cast<int64_t>(bias.size())};
      reader.read_slice(l.ffn->expert_bias_name(), whole, bias.data());
    }
  } else if (!options.model.init_from.empty()) {
    const checkpoint::HfModelFolder folder(options.model.init_from, cfg);
    folder.check();
    for (const model::Param& p : gpt.params().list()) {
      folder.read_slice(p.name, p.shard, gpt.params().data() + p.offset);
    }
  }
  checkpoint::write_safetensors(out_dir / "weights.safetensors", views(gpt.params(), false));

  auto dataset = data::make_dataset(options.data);
  const data::BatchLayout layout{mb, T, 1, 1, 0};
  data::StepBatch batch;
  data::fill_step_batch(*dataset, layout, 0, batch);
  Tensor tokens = Tensor::zeros({mb, T}), targets = Tensor::zeros({mb, T});
  for (size_t i = 0; i < batch.tokens.size(); ++i) {
    tokens.f32()[i] = static_cast<float>(batch.tokens[i]);
    targets.f32()[i] = static_cast<float>(batch.targets[i]);
  }
  checkpoint::write_safetensors(out_dir / "batch.safetensors",
                                {{"tokens", tokens}, {"targets", targets}});

  gpt.params().zero_grads();
  int64_t count = 0;
  const double loss_sum = gpt.forward_backward(batch.tokens.data(), batch.targets.data(),
                                               1.0f / static_cast<float>(mb * T), &count);
  checkpoint::write_safetensors(out_dir / "grads.safetensors", views(gpt.params(), true));

  const double norm = optim::grad_norm(gpt.params(), *backend);
  const OptimizerSetup& o = options.optimizer;
  optim::clip_grad_norm(gpt.params(), *backend, norm, o.grad_clip);
  auto optimizer = optim::make_optimizer(o.update, gpt.params(), *backend);
  const double lr = o.lr.at(0);
  optimizer->step(lr);
  checkpoint::write_safetensors(out_dir / "updated.safetensors", views(gpt.params(), false));

  nlohmann::ordered_json j;
  j["loss"] = loss_sum / static_cast<double>(count);
  j["grad_norm"] = norm;
  j["model"] = {{"vocab_size", cfg.vocab_size},
                {"block_size", cfg.max_seq_len},
                {"n_layer", cfg.n_layer},
                {"n_head", cfg.n_head},
                {"n_embd", cfg.d_model}};
  j["optimizer"] = {{"type", o.update.type},   {"lr", lr},
                    {"beta1", o.update.beta1}, {"beta2", o.update.beta2},
                    {"eps", o.update.eps},     {"weight_decay", o.update.weight_decay},
                    {"grad_clip", o.grad_clip}};
  std::ofstream(out_dir / "step.json") << j.dump(2) << '\n';
}

}  // namespace trainctl::train

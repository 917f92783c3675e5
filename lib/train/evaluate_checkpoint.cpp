#include "train/evaluate_checkpoint.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <optional>
#include <vector>

#include "data/blend.h"
#include "data/manifest.h"
#include "data/sampler.h"
#include "device/make_backend.h"
#include "tokenizer/load_tokenizer.h"
#include "train/checkpointing.h"
#include "train/engine.h"
#include "train/spec_options.h"
#include "util/error.h"

namespace trainctl::train {

namespace {

// Bytes of text per token id: the tokenizer of a `data prepare` directory, or none (bytes).
std::optional<std::vector<int64_t>> token_lengths(const data::DatasetOptions& data) {
  const std::filesystem::path dir = data::prepared_directory(data);
  if (dir.empty()) return std::nullopt;
  const data::TokenManifest m = data::read_manifest(dir);
  const std::filesystem::path file = data::verified_tokenizer_file(dir, m);
  if (file.empty()) return std::nullopt;
  const tokenizer::LoadedTokenizer t = tokenizer::load_tokenizer(file);
  std::vector<int64_t> lengths(static_cast<size_t>(t.tokenizer.vocab_size()), 0);
  for (int32_t id = 0; id < t.tokenizer.vocab_size(); ++id) {
    try {
      lengths[static_cast<size_t>(id)] = static_cast<int64_t>(t.tokenizer.token_bytes(id).size());
    } catch (const InputError&) {
      // a gap in the numbering: no text
    }
  }
  return lengths;
}

// Target tokens and the bytes they stand for over the eval batches (every one, on this rank).
void count_targets(const Engine& e, const std::optional<std::vector<int64_t>>& lengths,
                   EvalResult& r) {
  std::vector<int32_t> tokens, targets;
  for (int b = 0; b < e.options.training.eval_batches; ++b) {
    data::fill_eval_batch(*e.dataset, e.layout, b, tokens, targets);
    for (int32_t t : targets) {
      if (t < 0) continue;
      ++r.tokens;
      if (!lengths) {
        ++r.bytes;
      } else if (static_cast<size_t>(t) < lengths->size()) {
        r.bytes += (*lengths)[static_cast<size_t>(t)];
      }
    }
  }
}

}  // namespace

EvalResult evaluate_checkpoint(const config::JobSpec& spec, comm::ProcessGroups& groups,
                               int local_rank, const std::string& checkpoint) {
  const RunOptions options = run_options(spec);
  Engine e(options, groups, device::make_backend(options.device, options.backend, local_rank));
  Checkpointer ckpt(e, spec.run_dir, [](const std::string& line) { spdlog::info("{}", line); });
  EvalResult r;
  r.step = ckpt.restore(checkpoint);
  r.loss = e.evaluate();
  if (groups.rank == 0) {
    count_targets(e, token_lengths(options.data), r);
    if (r.bytes > 0) {
      r.bits_per_byte =
          r.loss * static_cast<double>(r.tokens) / (static_cast<double>(r.bytes) * std::log(2.0));
    }
  }
  groups.world->barrier();
  return r;
}

std::string format_eval(const EvalResult& r) {
  char line[256];
  std::snprintf(line, sizeof line,
                "eval step %lld: val_loss %.6f, bits per byte %.6f (%lld tokens, %lld bytes)\n",
                static_cast<long long>(r.step), r.loss, r.bits_per_byte,
                static_cast<long long>(r.tokens), static_cast<long long>(r.bytes));
  return line;
}

}  // namespace trainctl::train

#include "sample_command.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "checkpoint/commit.h"
#include "checkpoint/reader.h"
#include "device/cuda_plugin.h"
#include "device/make_backend.h"
#include "model/gpt_decode.h"
#include "model/token_sampling.h"
#include "run_tokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace {

namespace fs = std::filesystem;

// InputError naming metadata.json when the checkpoint does not hold the model its
// metadata describes (another model type's tensors, or tensors of other shapes).
void require_gpt(const checkpoint::CheckpointReader& reader) {
  const std::string file = (reader.dir() / checkpoint::kMetadataFile).string();
  const model::ModelConfig& c = reader.metadata().model;
  const std::string family = model::to_string(c.family);
  for (const auto& [name, shape] : model::GptDecoder::parameter_shapes(c)) {
    if (!reader.contains(name)) {
      throw InputError(file + ": not a " + family + " checkpoint as its metadata says (no tensor " +
                       name + "): trainctl sample runs gpt and llama models");
    }
    if (reader.global_shape(name) != shape) {
      throw InputError(file + ": tensor " + name + " has shape " +
                       shape_string(reader.global_shape(name)) + ", a " + family +
                       " of this config has " + shape_string(shape));
    }
  }
}

// The prompt's tokens: bytes, or BPE ids with the tokenizer; an empty prompt starts from
// the end-of-text token when the vocabulary has one.
std::vector<int32_t> encode_prompt(const std::string& prompt, const tokenizer::LoadedTokenizer* tok,
                                   int vocab_size) {
  std::vector<int32_t> ids;
  if (tok) {
    tokenizer::require_utf8(prompt, "--prompt");
    tokenizer::Encoder(tok->tokenizer).encode(prompt, ids);
    if (ids.empty() && tok->tokenizer.eot_id()) ids.push_back(*tok->tokenizer.eot_id());
  } else {
    for (unsigned char c : prompt) ids.push_back(c);
  }
  if (ids.empty()) {
    throw InputError(std::string("--prompt is empty and ") +
                     (tok ? tok->tokenizer.source() + " has no end-of-text token"
                          : "byte-level text has no BOS token") +
                     " to start from: give a prompt");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) {
      throw InputError("--prompt: token " + std::to_string(ids[i]) + " (at " + std::to_string(i) +
                       ") is outside the model's vocabulary of " + std::to_string(vocab_size) +
                       (tok ? "" : " (byte-level: every byte must be below vocab_size)"));
    }
  }
  return ids;
}

}  // namespace

void check_sample_args(const SampleArgs& a) {
  auto refuse = [](const std::string& option, const std::string& value, const char* range) {
    throw InputError(option + " " + value + ": give " + range);
  };
  if (!std::isfinite(a.temperature) || a.temperature < 0 || a.temperature > 100) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", a.temperature);
    refuse("--temperature", text, "a number from 0 (greedy) to 100");
  }
  if (a.max_new_tokens < 0 || a.max_new_tokens > 1000000) {
    refuse("--max-new-tokens", std::to_string(a.max_new_tokens),
           "a whole number from 0 to 1000000");
  }
  if (a.top_k < 0) {
    refuse("--top-k", std::to_string(a.top_k), "0 (every token) or a positive whole number");
  }
  if (a.threads < 1 || a.threads > 256) {
    refuse("--threads", std::to_string(a.threads), "a whole number from 1 to 256");
  }
}

std::string whole_number(std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return "'" + text + "' is not a whole number of 0 or more (digits only)";
  }
  return "";
}

int cmd_sample(const SampleArgs& args) {
  check_sample_args(args);
  const fs::path dir = checkpoint::resolve_checkpoint(args.from);
  checkpoint::CheckpointReader reader(dir);
  require_gpt(reader);
  const model::ModelConfig config = reader.metadata().model;

  const fs::path tok_path =
      args.tokenizer.empty() ? tokenizer_of_run(run_dir_of(dir)) : args.tokenizer;
  std::optional<tokenizer::LoadedTokenizer> tok;
  if (!tok_path.empty()) tok = tokenizer::load_tokenizer(tok_path);
  const std::vector<int32_t> prompt =
      encode_prompt(args.prompt, tok ? &*tok : nullptr, config.vocab_size);

  ops::BackendOptions bo;
  bo.threads = args.threads;
  const Device device = args.device == "cuda" ? Device::cuda : Device::cpu;
  std::unique_ptr<ops::Backend> backend;
  try {
    backend = device::make_backend(device, bo);
  } catch (const device::DeviceUnavailable& e) {
    throw InputError(std::string("--device cuda: ") + e.what() +
                     "; sample on the CPU with --device cpu");
  }
  model::GptDecoder decoder(config, *backend, [&](const std::string& name, float* out, size_t n) {
    const std::vector<float> full = reader.read_full(name);
    std::copy_n(full.data(), n, out);
  });
  std::fprintf(stderr, "sampling from %s (step %lld, %s tokens, on the %s)\n", dir.string().c_str(),
               static_cast<long long>(reader.metadata().step), tok ? "BPE" : "byte-level",
               device == Device::cuda ? "GPU" : "CPU");

  std::string text = args.prompt;
  std::fwrite(text.data(), 1, text.size(), stdout);
  model::SampleOptions so;
  so.temperature = static_cast<float>(args.temperature);
  so.top_k = args.top_k;
  so.seed = args.seed;
  // BPE tokens may split a UTF-8 character: text is printed as whole tokens' bytes, so the
  // output's bytes are exactly the decoded ids'.
  model::generate(decoder, prompt, args.max_new_tokens, so, [&](int32_t id) {
    std::string piece;
    if (tok) {
      try {
        tok->tokenizer.decode(&id, 1, piece);
      } catch (const InputError&) {
        piece.clear();  // an id of the model's padded vocabulary the tokenizer lacks
      }
    } else {
      piece.push_back(static_cast<char>(id < 256 ? id : '?'));
    }
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  return kExitOk;
}

}  // namespace trainctl::app

// `trainctl ckpt import`: a Hugging Face model folder as a trainctl checkpoint
// (checkpoint/hf_import_checkpoint.h).
#include <cstdio>

#include "checkpoint/hf_import_checkpoint.h"
#include "ckpt_commands.h"
#include "ckpt_text.h"
#include "config/init_from.h"
#include "train/spec_options.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace fs = std::filesystem;

int cmd_ckpt_import(const fs::path& folder, const fs::path& out) {
  const fs::path dir = fs::absolute(folder).lexically_normal();
  config::JobSpec spec;
  spec.model = config::detail::hf_model(dir).model;
  const model::ModelConfig model = train::gpt_config(spec);
  const checkpoint::HfModelFolder hf(dir, model);
  const checkpoint::ImportSummary s = checkpoint::write_imported_checkpoint(hf, model, out);
  std::printf(
      "wrote %s: a step-0 checkpoint of %s (%d tensors, %lld parameters, %s; no optimizer "
      "state)\n",
      out.string().c_str(),
      model.moe.enabled() ? "MixtralForCausalLM"
      : model.llama()     ? "LlamaForCausalLM"
                          : "GPT2LMHeadModel",
      s.tensors, static_cast<long long>(s.parameters), size_text(s.bytes).c_str());
  return kExitOk;
}

}  // namespace trainctl::app

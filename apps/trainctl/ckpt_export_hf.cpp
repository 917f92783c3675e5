// `trainctl ckpt export --format hf`: the checkpoint as a Hugging Face folder
// (checkpoint/export_hf.h), with the tokenizer the run's data was prepared with.
#include <cstdio>

#include "checkpoint/commit.h"
#include "checkpoint/export_hf.h"
#include "ckpt_commands.h"
#include "ckpt_text.h"
#include "run_tokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "util/error.h"
#include "util/exit_codes.h"

namespace trainctl::app {

namespace fs = std::filesystem;
namespace ck = checkpoint;

int cmd_ckpt_export_hf(const fs::path& ckpt, const fs::path& out, const fs::path& tokenizer) {
  const fs::path dir = ck::resolve_checkpoint(ckpt);
  ck::HfExportOptions o;
  o.out_dir = out;
  if (o.out_dir.empty()) {
    const fs::path run_dir = run_dir_of(dir);
    if (run_dir.empty()) {
      throw InputError(dir.string() + " is not inside a run directory's checkpoints/: give --out");
    }
    o.out_dir = run_dir / "hf";
  }
  std::error_code ec;
  if (fs::exists(o.out_dir, ec) && !fs::is_directory(o.out_dir, ec)) {
    throw InputError("--out " + o.out_dir.string() + " exists and is not a directory");
  }
  const fs::path tok_path = tokenizer.empty() ? tokenizer_of_run(run_dir_of(dir)) : tokenizer;
  if (!tok_path.empty()) {
    const tokenizer::LoadedTokenizer t = tokenizer::load_tokenizer(tok_path);
    o.tokenizer_files = t.files;
    if (auto eot = t.tokenizer.eot_id()) o.eos_token_id = *eot;
  }
  ck::check_export_target(dir, o.out_dir / "model.safetensors");
  ck::CheckpointReader reader(dir);
  if (!tok_path.empty()) {
    const tokenizer::LoadedTokenizer t = tokenizer::load_tokenizer(tok_path);
    if (t.tokenizer.vocab_size() > reader.metadata().model.vocab_size) {
      throw InputError(tok_path.string() + ": the tokenizer has " +
                       std::to_string(t.tokenizer.vocab_size()) +
                       " tokens, more than the model's vocab_size " +
                       std::to_string(reader.metadata().model.vocab_size));
    }
  }
  const ck::ExportSummary s = ck::export_hf(reader, o);
  std::printf(
      "wrote %s: model.safetensors (%s, %d tensors, %lld parameters, %s), "
      "config.json%s (step %lld of %s)\n",
      o.out_dir.string().c_str(),
      reader.metadata().model.llama() ? "LlamaForCausalLM" : "GPT2LMHeadModel", s.tensors,
      static_cast<long long>(s.parameters), size_text(s.bytes).c_str(),
      o.tokenizer_files.empty() ? ", no tokenizer" : ", tokenizer files",
      static_cast<long long>(reader.metadata().step), dir.string().c_str());
  return kExitOk;
}

}  // namespace trainctl::app

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

namespace {

// Symbolic links resolved as far as the path exists.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal() : r;
}

// The folder the export may write: not a run directory's own files (its model.safetensors,
// config, checkpoints: only its hf/, the default, is the export's), and not a folder that
// already holds files unless `force`.
void check_hf_target(const fs::path& out_dir, const fs::path& run_dir, bool force) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec)) {
    throw InputError("--out " + out_dir.string() + " exists and is not a directory");
  }
  if (!run_dir.empty()) {
    const fs::path run = resolved(run_dir), target = resolved(out_dir);
    const fs::path rel = target.lexically_relative(run);
    const bool inside = !rel.empty() && *rel.begin() != "..";
    if (inside && *rel.begin() != "hf") {
      throw InputError("--out " + out_dir.string() + " is " +
                       (rel == "." ? "the run directory " : "inside the run directory ") +
                       run_dir.string() +
                       ", whose own files (model.safetensors, checkpoints, ...) the export "
                       "would replace: give a folder outside it, or leave --out out for " +
                       (run_dir / "hf").string());
    }
  }
  if (!force && fs::is_directory(out_dir, ec) && !fs::is_empty(out_dir, ec)) {
    throw InputError("--out " + out_dir.string() +
                     " is not empty: the export would replace its files; give a new or empty "
                     "folder, or --force to write over them");
  }
}

// After a forced export over an earlier one: the earlier tokenizer files this one did not
// write go (a stale tokenizer.json would be the one AutoTokenizer loads).
void remove_stale_tokenizer_files(const fs::path& out_dir, bool wrote_json, bool any) {
  std::error_code ec;
  if (!wrote_json) fs::remove(out_dir / "tokenizer.json", ec);
  if (wrote_json || !any) {
    fs::remove(out_dir / "vocab.json", ec);
    fs::remove(out_dir / "merges.txt", ec);
  }
  if (!any) fs::remove(out_dir / "tokenizer_config.json", ec);
}

}  // namespace

int cmd_ckpt_export_hf(const fs::path& ckpt, const fs::path& out, const fs::path& tokenizer,
                       bool force) {
  const fs::path dir = ck::resolve_checkpoint(ckpt);
  ck::HfExportOptions o;
  o.out_dir = out;
  const fs::path run_dir = run_dir_of(dir);
  if (o.out_dir.empty()) {
    if (run_dir.empty()) {
      throw InputError(dir.string() + " is not inside a run directory's checkpoints/: give --out");
    }
    o.out_dir = run_dir / "hf";
  }
  check_hf_target(o.out_dir, run_dir, force);
  const fs::path tok_path = tokenizer.empty() ? tokenizer_of_run(run_dir) : tokenizer;
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
  bool wrote_json = false;
  for (const fs::path& f : o.tokenizer_files) {
    wrote_json = wrote_json || (f.filename() != "vocab.json" && f.filename() != "merges.txt");
  }
  if (force) remove_stale_tokenizer_files(o.out_dir, wrote_json, !o.tokenizer_files.empty());
  std::printf(
      "wrote %s: model.safetensors (%s, %d tensors, %lld parameters, %s), "
      "config.json%s (step %lld of %s)\n",
      o.out_dir.string().c_str(),
      reader.metadata().model.moe.enabled() ? "MixtralForCausalLM"
      : reader.metadata().model.llama()     ? "LlamaForCausalLM"
                                            : "GPT2LMHeadModel",
      s.tensors, static_cast<long long>(s.parameters), size_text(s.bytes).c_str(),
      o.tokenizer_files.empty() ? ", no tokenizer" : ", tokenizer files",
      static_cast<long long>(reader.metadata().step), dir.string().c_str());
  return kExitOk;
}

}  // namespace trainctl::app

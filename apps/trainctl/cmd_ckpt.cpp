// `trainctl ckpt info|verify|export|import`: look inside a checkpoint without training. The
// handlers are in ckpt_commands.cpp, ckpt_verify.cpp and ckpt_export_hf.cpp.
#include "ckpt_commands.h"
#include "cli.h"
#include "util/error.h"

namespace trainctl::app {
namespace {

struct CkptOptions {
  std::string path, out, format = "nanogpt", tokenizer;
  bool tensors = false, json = false, force = false;
};

void add_checkpoint_argument(CLI::App* cmd, CkptOptions& o) {
  cmd->add_option("checkpoint", o.path,
                  "A step directory (run_dir/checkpoints/step_NNNNNNNN), a checkpoints/ "
                  "directory or a run directory (then its latest complete checkpoint)")
      ->required();
}

int run_export(const CkptOptions& o) {
  if (o.format == "hf") return cmd_ckpt_export_hf(o.path, o.out, o.tokenizer, o.force);
  if (o.out.empty()) throw InputError("ckpt export: --out FILE is required");
  if (!o.tokenizer.empty() || o.force) {
    throw InputError("ckpt export: --tokenizer and --force go with --format hf only");
  }
  return cmd_ckpt_export(o.path, o.out);
}

CLI::App* add_export(CLI::App* ckpt, CkptOptions& o) {
  CLI::App* cmd = ckpt->add_subcommand(
      "export",
      "Write the model as one safetensors file with nanoGPT names (loads in PyTorch), or as a "
      "Hugging Face folder (--format hf)");
  add_checkpoint_argument(cmd, o);
  cmd->add_option("--out", o.out,
                  "The safetensors file to write; with --format hf the folder (default: "
                  "the run directory's hf/)");
  cmd->add_option("--format", o.format,
                  "nanogpt: one safetensors file; hf: a folder transformers loads with "
                  "AutoModelForCausalLM.from_pretrained (GPT2LMHeadModel for gpt, LlamaForCausalLM "
                  "for llama, MixtralForCausalLM for llama + moe)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nanogpt", "hf"}));
  cmd->add_flag("--force", o.force,
                "--format hf: write into an --out folder that already holds files "
                "(without it such a folder is refused)");
  cmd->add_option("--tokenizer", o.tokenizer,
                  "--format hf: the tokenizer files to include (tokenizer.json or "
                  "vocab.json); default: those of the run's `data prepare` directory");
  cmd->footer(
      "Example:\n  trainctl ckpt export runs/gpt-tiny-3d --out model.safetensors\n\n"
      "Reassembles every parameter from the shards of whatever dp/tp/pp layout wrote the\n"
      "checkpoint, with its global shape (nn.Linear's [out, in]): a gpt under nanoGPT's\n"
      "names (transformer.h.0.attn.c_attn.weight, ...; a tied lm_head.weight is\n"
      "transformer.wte.weight and not stored), a llama under Hugging Face's\n"
      "(model.layers.0.self_attn.q_proj.weight, ...). Optimizer state is left out. --out\n"
      "must lie outside every checkpoint directory; a damaged or incomplete checkpoint is\n"
      "refused (exit 2) and nothing is written.\n\n"
      "--format hf writes DIR/model.safetensors (GPT2LMHeadModel names with the attn.c_attn,\n"
      "attn.c_proj, mlp.c_fc and mlp.c_proj weights transposed to Conv1D's [in, out]; or\n"
      "LlamaForCausalLM names), DIR/config.json and the tokenizer files (tokenizer.json and\n"
      "tokenizer_config.json, which AutoTokenizer loads), e.g.\n"
      "  trainctl ckpt export runs/gpt-bpe --format hf     # -> runs/gpt-bpe/hf/\n"
      "  python -c \"from transformers import AutoModelForCausalLM as M; "
      "M.from_pretrained('runs/gpt-bpe/hf')\"\n"
      "DIR may not be the run directory or inside it (but its hf/), and must be new or\n"
      "empty unless --force (exit 2).");
  return cmd;
}

}  // namespace

void add_ckpt_command(CLI::App& app, Dispatches& out) {
  auto o = std::make_shared<CkptOptions>();
  CLI::App* ckpt = app.add_subcommand("ckpt", "Show, verify, export or import a checkpoint");
  ckpt->require_subcommand(1);
  CLI::App* info = ckpt->add_subcommand(
      "info", "What a checkpoint holds: step, data position, layout, model, files");
  add_checkpoint_argument(info, *o);
  info->add_flag("--tensors", o->tensors,
                 "List every tensor: global shape, how it is split, number of shards");
  info->add_flag("--json", o->json, "Print metadata.json instead");
  info->footer("Example:\n  trainctl ckpt info runs/gpt-tiny-3d --tensors");
  CLI::App* verify = ckpt->add_subcommand(
      "verify", "Recompute every file's checksum and check that every tensor is complete");
  add_checkpoint_argument(verify, *o);
  verify->footer(
      "Example:\n  trainctl ckpt verify runs/gpt-tiny-3d/checkpoints/step_00000100\n"
      "  trainctl ckpt verify runs/gpt-tiny-3d      # every checkpoint, and the newest valid "
      "one\n\n"
      "Checks metadata.json (its own checksum and every field), every file's size and\n"
      "checksum, and that every tensor of the model is whole. Exit code 0 when intact; 2 when\n"
      "anything is truncated, altered, edited or missing (each problem is named on stderr:\n"
      "resume from an older checkpoint with --resume PATH) or the path holds no checkpoint.");
  CLI::App* exp = add_export(ckpt, *o);
  CLI::App* imp = ckpt->add_subcommand(
      "import",
      "Write a Hugging Face model folder (GPT-2, Llama, Mixtral) as a trainctl checkpoint");
  imp->add_option("folder", o->path,
                  "A Hugging Face model folder: config.json and model.safetensors, or shards "
                  "listed by model.safetensors.index.json")
      ->required();
  imp->add_option("--out", o->out, "The checkpoint directory to write (new or empty)")->required();
  imp->footer(
      "Example:\n  trainctl ckpt import ~/models/gpt2 --out ckpt/gpt2\n"
      "  trainctl train job.yaml --resume ckpt/gpt2\n\n"
      "Writes a step-0 checkpoint (the parameters, converted to fp32; no optimizer state): a\n"
      "run resumed from it starts with a fresh optimizer at step 1, on any dp/tp/pp layout.\n"
      "To train from the folder directly, set model.init_from in the job spec instead.");
  ckpt->footer(
      "Checkpoints are written by `trainctl train` to run_dir/checkpoints/step_NNNNNNNN/ (one\n"
      "safetensors shard per rank plus metadata.json with checksums); checkpoints/latest names\n"
      "the newest complete one.\n"
      "Example:\n  trainctl ckpt verify runs/gpt-tiny-3d && trainctl ckpt export runs/gpt-tiny-3d "
      "--out model.safetensors");
  out.push_back({info, [o] { return cmd_ckpt_info(o->path, o->tensors, o->json); }});
  out.push_back({verify, [o] { return cmd_ckpt_verify(o->path); }});
  out.push_back({exp, [o] { return run_export(*o); }});
  out.push_back({imp, [o] { return cmd_ckpt_import(o->path, o->out); }});
}

}  // namespace trainctl::app

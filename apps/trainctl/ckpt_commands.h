#pragma once
// `trainctl ckpt info|verify|export`: look inside a checkpoint without training. CKPT is a
// step directory (runs/x/checkpoints/step_00000100), a checkpoints/ directory or a run
// directory (their latest complete checkpoint). Each returns the process exit code and lets
// InputError propagate (main.cpp maps it to 2).
#include <filesystem>

namespace trainctl::app {

// What the checkpoint holds: step, data position, layout, model, files; with `tensors`, one
// line per tensor (global shape, how it is split, copies); with `json`, metadata.json.
int cmd_ckpt_info(const std::filesystem::path& ckpt, bool tensors, bool json);

// Checks metadata.json (its checksum and every field), recomputes every file's size and
// checksum, and checks every tensor of the model is whole (ckpt_verify.cpp). A step
// directory: that checkpoint, one line per file. A checkpoints/ or run directory: every
// step_<N> in it, one line each, then the newest valid one. Exit 0 when everything is
// intact, 2 (kExitBadInput: the user picks another checkpoint) with one line per problem on
// stderr when anything is damaged.
int cmd_ckpt_verify(const std::filesystem::path& ckpt);

// The whole model as one safetensors file with nanoGPT names and global shapes. Refuses
// (exit 2) an `out` inside a checkpoint directory, and a checkpoint that is damaged,
// incomplete or holds no model tensor; `out` is written only when complete.
int cmd_ckpt_export(const std::filesystem::path& ckpt, const std::filesystem::path& out);

// `--format hf`: a Hugging Face folder (checkpoint/export_hf.h) at `out` (empty: the run
// directory's hf/), with `tokenizer`'s files (a JSON tokenizer always as tokenizer.json, as
// AutoTokenizer expects), or (empty) those of the run's prepared data when its
// config.resolved.yaml trains from a `data prepare` directory. Refuses (exit 2) an `out`
// that is the checkpoint's run directory or inside it (but its hf/), and an `out` that
// already holds files unless `force` (which then replaces them and removes the earlier
// export's tokenizer files this one does not write).
int cmd_ckpt_export_hf(const std::filesystem::path& ckpt, const std::filesystem::path& out,
                       const std::filesystem::path& tokenizer, bool force = false);

// `ckpt import`: the Hugging Face folder `folder` (GPT2LMHeadModel, LlamaForCausalLM or
// MixtralForCausalLM; config.json + safetensors) as a step-0 checkpoint at `out` (new or
// empty) with no optimizer state (ckpt_import_hf.cpp). Bad input (no config.json, another
// architecture, a tensor of the wrong shape or dtype, a missing shard) exits 2 naming the
// file.
int cmd_ckpt_import(const std::filesystem::path& folder, const std::filesystem::path& out);

}  // namespace trainctl::app

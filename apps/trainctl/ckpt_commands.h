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

// Recomputes every file's size and checksum and checks every tensor is whole. Exit 0 when
// intact, 1 (kExitInternal) with one line per problem on stderr when damaged.
int cmd_ckpt_verify(const std::filesystem::path& ckpt);

// The whole model as one safetensors file with nanoGPT names and global shapes. A damaged
// file it needs ends the export with exit code 1; `out` is written only when complete.
int cmd_ckpt_export(const std::filesystem::path& ckpt, const std::filesystem::path& out);

}  // namespace trainctl::app

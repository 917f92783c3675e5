#pragma once
// What a blend (data.type blend, data/blend.h) adds to a run: each source's validation loss
// (val_loss/<name> in metrics.jsonl and TensorBoard), each source's position in the
// checkpoint metadata (data.sources) and in run_dir/data_sources.json (how many samples and
// tokens of each source were consumed), and the resume from those positions. Every function
// is a no-op (or returns nothing) for other data.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/metadata.h"
#include "train/engine.h"

namespace trainctl::train {

// val_loss/<name> per source: e.evaluate on each source's validation split (collective over
// the world, like e.evaluate). Empty for data other than a blend.
std::vector<std::pair<std::string, double>> evaluate_sources(Engine& e);

// Each source's position after `step` steps, for the checkpoint's metadata.
std::vector<checkpoint::SourcePosition> source_positions(const Engine& e, int64_t step);

// run_dir/data_sources.json after `step` steps (rank 0 calls it; written atomically).
void write_data_sources(const Engine& e, const std::filesystem::path& run_dir, int64_t step);

// Resume the blend from a checkpoint's positions; returns what to tell the user (empty when
// the stream continues unchanged).
std::string continue_blend(Engine& e, const checkpoint::CheckpointMetadata& meta);

}  // namespace trainctl::train

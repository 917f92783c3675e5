#pragma once
// Every section of the job spec and the keys it accepts, in one table: the section readers
// (sections.cpp) take their key lists from it, and an unknown key is looked up in the other
// sections, so `training: {lr: ...}` (or `--set training.lr=...`) suggests `optimizer.lr`.
#include <string>
#include <vector>

namespace trainctl::config::detail {

// The keys of the section at `section_path` ("" = the top level, "parallel.parameter_server"
// for a nested one). Empty for a path that is not a section.
const std::vector<std::string>& section_keys(const std::string& section_path);

// The full key paths of the sections other than `section_path` that accept `key`, e.g.
// {"optimizer.lr"} for ("training", "lr"); {"checkpoint.every_steps", "logging.every_steps"}
// for ("training", "every_steps").
std::vector<std::string> key_in_other_sections(const std::string& section_path,
                                               const std::string& key);

}  // namespace trainctl::config::detail

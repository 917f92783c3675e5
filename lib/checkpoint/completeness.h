#pragma once
// Whether a checkpoint lists everything its metadata says it should, beyond each file's own
// integrity (reader.h's check_files): a file from every rank of the layout that wrote it
// (each rank writes one, even an empty one), every tensor of the model it records with the
// model's global shape, no tensor of another model, and each optimizer state it holds for
// every parameter. A checkpoint that fails these was assembled wrongly or edited: a resume
// or export from it would miss state or fill it with zeros.
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/metadata.h"

namespace trainctl::checkpoint {

class CheckpointReader;

// One message per problem, each naming the checkpoint `dir`.
std::vector<std::string> file_list_problems(const CheckpointMetadata& m,
                                            const std::filesystem::path& dir);
std::vector<std::string> model_tensor_problems(const CheckpointReader& reader);

}  // namespace trainctl::checkpoint

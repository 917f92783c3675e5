#pragma once
// The documents `trainctl data prepare` reads: a UTF-8 text file (one document), a JSONL
// file (*.jsonl: one JSON object per line with a string field "text", one document each),
// or a directory (its *.txt and *.jsonl files, recursively, in path order; hidden files and
// directories skipped). All of it is held in memory.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl::data {

struct InputDocuments {
  std::vector<std::string> texts;  // one per document, valid UTF-8
  std::vector<std::filesystem::path> files;
  size_t bytes = 0;
};

// Throws InputError naming the file (and line, for JSONL) for a missing path, a file that is
// not UTF-8, a JSONL line that is not an object with a string "text", or a directory
// without such files.
InputDocuments read_input_documents(const std::filesystem::path& input);

}  // namespace trainctl::data

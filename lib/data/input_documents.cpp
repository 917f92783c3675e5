#include "data/input_documents.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/regular_file.h"

namespace trainctl::data {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxFileBytes = 64ull << 30;

bool is_jsonl(const fs::path& p) { return p.extension() == ".jsonl"; }

void read_jsonl(const fs::path& path, const std::string& raw, InputDocuments& out) {
  size_t pos = 0, line = 0;
  while (pos < raw.size()) {
    size_t end = raw.find('\n', pos);
    if (end == std::string::npos) end = raw.size();
    const std::string_view text(raw.data() + pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(line);
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e400)
      throw InputError(where + ": not a JSON object (" + e.what() + ")");
    }
    if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string()) {
      throw InputError(where + ": each JSONL line must be an object with a string field \"text\"");
    }
    std::string s = doc["text"].get<std::string>();
    tokenizer::require_utf8(s, where);  // \ud800-style escapes can still decode to bad bytes
    out.bytes += s.size();
    out.texts.push_back(std::move(s));
  }
}

void read_file(const fs::path& path, InputDocuments& out) {
  const RegularFile file(path, "input file");
  std::string raw = file.read_all(kMaxFileBytes);
  out.files.push_back(path);
  if (is_jsonl(path)) {
    read_jsonl(path, raw, out);
    return;
  }
  tokenizer::require_utf8(raw, path.string());
  if (raw.empty()) return;
  out.bytes += raw.size();
  out.texts.push_back(std::move(raw));
}

}  // namespace

InputDocuments read_input_documents(const fs::path& input) {
  InputDocuments out;
  std::error_code ec;
  if (!fs::exists(input, ec)) throw InputError(input.string() + ": no such file or directory");
  if (fs::is_directory(input, ec)) {
    std::vector<fs::path> files;
    for (auto it = fs::recursive_directory_iterator(input, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] == '.') {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      const auto ext = it->path().extension();
      if (it->is_regular_file(ec) && (ext == ".txt" || ext == ".jsonl"))
        files.push_back(it->path());
    }
    if (ec) throw InputError(input.string() + ": cannot list the directory: " + ec.message());
    if (files.empty()) {
      throw InputError(input.string() + ": the directory holds no *.txt or *.jsonl files");
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) read_file(f, out);
  } else {
    read_file(input, out);
  }
  if (out.bytes == 0) {
    throw InputError(input.string() + ": the input is empty (no text to tokenize)");
  }
  return out;
}

}  // namespace trainctl::data

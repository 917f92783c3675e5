// Reads Hugging Face's tokenizer.json (the parts load_tokenizer.h lists as supported).
#include <nlohmann/json.hpp>

#include "tokenizer/load_tokenizer.h"
#include "tokenizer/vocab_parts.h"
#include "util/error.h"

namespace trainctl::tokenizer {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw InputError(source + ": " + problem);
}

std::string type_of(const json& node) {
  if (!node.is_object()) return "";
  auto it = node.find("type");
  return it != node.end() && it->is_string() ? it->get<std::string>() : "";
}

bool flag(const json& node, const char* key, bool fallback) {
  auto it = node.find(key);
  if (it == node.end() || it->is_null()) return fallback;
  return it->is_boolean() ? it->get<bool>() : fallback;
}

bool unset_or_empty(const json& node, const char* key) {
  auto it = node.find(key);
  return it == node.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
}

void read_model(const json& model, const std::string& src, TokenizerParts& parts) {
  if (!model.is_object()) fail(src, "has no \"model\" object");
  const std::string type = type_of(model);
  if (!type.empty() && type != "BPE") {
    fail(src, "model.type is " + type +
                  "; trainctl encodes byte-level BPE tokenizers only (model.type BPE)");
  }
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    fail(src, "model.vocab is missing or not an object of token: id");
  }
  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array()) {
    fail(src, "model.merges is missing or not a list; a BPE model needs its merge list");
  }
  if (auto d = model.find("dropout");
      d != model.end() && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0)) {
    fail(src, "model.dropout is set; BPE dropout (random merges) is not supported for encoding");
  }
  if (!unset_or_empty(model, "continuing_subword_prefix") ||
      !unset_or_empty(model, "end_of_word_suffix")) {
    fail(src,
         "model.continuing_subword_prefix / end_of_word_suffix are set; byte-level BPE "
         "uses neither and trainctl does not support them");
  }
  if (flag(model, "byte_fallback", false)) {
    fail(src,
         "model.byte_fallback is true (a SentencePiece-style BPE); trainctl supports "
         "byte-level BPE (a ByteLevel pre-tokenizer) only");
  }
  std::vector<std::pair<std::string, int64_t>> vocab;
  vocab.reserve(vocab_it->size());
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it.value().is_number_integer())
      fail(src, "model.vocab['" + it.key() + "'] is not an integer id");
    vocab.emplace_back(it.key(), it.value().get<int64_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_it->size());
  for (const json& m : *merges_it) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        fail(src, "model.merges[" + std::to_string(merges.size()) + "] is '" + s +
                      "'; a merge is two tokens separated by one space");
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      fail(src, "model.merges[" + std::to_string(merges.size()) +
                    "] is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  fill_vocab_and_merges(vocab, merges, src, parts);
  parts.bpe.ignore_merges = flag(model, "ignore_merges", false);
  // Every byte has a token (checked), so the unknown token is never used; a name that is not
  // in the vocabulary still says the file is not what it claims.
  if (auto u = model.find("unk_token"); u != model.end() && u->is_string()) {
    const std::string unk = u->get<std::string>();
    if (!vocab_it->contains(unk)) fail(src, "model.unk_token '" + unk + "' is not in model.vocab");
  }
}

void read_byte_level(const json& node, const std::string& src, TokenizerParts& parts,
                     bool split_before) {
  const bool use_regex = flag(node, "use_regex", true);
  parts.add_prefix_space = flag(node, "add_prefix_space", false);
  if (split_before && use_regex) {
    fail(src,
         "pre_tokenizer: ByteLevel after a Split must have use_regex: false "
         "(two split patterns in a row are not supported)");
  }
  if (!split_before && !use_regex) {
    fail(src,
         "pre_tokenizer: ByteLevel with use_regex: false and no Split before it would "
         "encode whole texts as one word; not supported");
  }
}

void read_pre_tokenizer(const json& pre, const std::string& src, TokenizerParts& parts) {
  const std::string supported =
      "; supported: ByteLevel, or Sequence[Split(GPT-2 or Llama 3 pattern, Isolated), "
      "ByteLevel(use_regex: false)]";
  const std::string type = type_of(pre);
  if (type == "ByteLevel") {
    read_byte_level(pre, src, parts, false);
    parts.pattern = SplitPattern::gpt2;
    return;
  }
  if (type != "Sequence") {
    fail(src, "pre_tokenizer is " + (type.empty() ? std::string("missing") : type) + supported);
  }
  const json& seq = pre.value("pretokenizers", json::array());
  if (!seq.is_array() || seq.size() != 2 || type_of(seq[0]) != "Split" ||
      type_of(seq[1]) != "ByteLevel") {
    fail(src, "pre_tokenizer is a Sequence of something else" + supported);
  }
  const json& split = seq[0];
  const json& pattern = split.value("pattern", json::object());
  if (!pattern.is_object() || !pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    fail(src, "pre_tokenizer: Split.pattern must be {\"Regex\": ...}" + supported);
  }
  const auto p = pattern_from_regex(pattern["Regex"].get<std::string>());
  if (!p) {
    fail(src, "pre_tokenizer: Split pattern " + pattern["Regex"].dump() +
                  " is not one trainctl implements (the GPT-2 and Llama 3 patterns)");
  }
  if (split.value("behavior", std::string()) != "Isolated" || flag(split, "invert", false)) {
    fail(src, "pre_tokenizer: Split must have behavior Isolated and invert false");
  }
  parts.pattern = *p;
  read_byte_level(seq[1], src, parts, true);
}

void read_added_tokens(const json& doc, const std::string& src, TokenizerParts& parts) {
  auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return;
  if (!it->is_array()) fail(src, "added_tokens is not a list");
  for (const json& a : *it) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string()) {
      fail(src, "added_tokens: every entry needs an integer id and a string content");
    }
    AddedToken t;
    const int64_t id = a["id"].get<int64_t>();
    t.content = a["content"].get<std::string>();
    t.special = flag(a, "special", false);
    if (id < 0 || id > 0x7fffffff) {
      fail(src, "added token '" + t.content + "' has id " + std::to_string(id) +
                    "; ids must lie in [0, number of vocabulary entries + added tokens)");
    }
    t.id = static_cast<int32_t>(id);
    if (flag(a, "lstrip", false) || flag(a, "rstrip", false) || flag(a, "single_word", false)) {
      fail(src, "added token '" + t.content +
                    "' sets lstrip, rstrip or single_word, which trainctl does not support");
    }
    parts.added.push_back(std::move(t));
  }
}

}  // namespace

TokenizerParts parse_tokenizer_json(const std::string& text, const std::string& src) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (1e400)
    fail(src, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!doc.is_object()) fail(src, "is not a tokenizer.json (the top level is not an object)");
  TokenizerParts parts;
  parts.source = src;
  parts.kind = "tokenizer.json";
  try {
    if (auto n = doc.find("normalizer"); n != doc.end() && !n->is_null()) {
      fail(src, "has a normalizer (" + type_of(*n) +
                    "); trainctl supports byte-level BPE without normalization");
    }
    // Added tokens first: the model's ids are checked against both.
    read_added_tokens(doc, src, parts);
    read_model(doc.value("model", json()), src, parts);
    read_pre_tokenizer(doc.value("pre_tokenizer", json()), src, parts);
    if (auto d = doc.find("decoder");
        d != doc.end() && !d->is_null() && type_of(*d) != "ByteLevel") {
      fail(src, "decoder is " + type_of(*d) + "; byte-level BPE decodes with ByteLevel");
    }
  } catch (const json::exception& e) {
    fail(src, std::string("unexpected structure (") + e.what() + ")");
  }
  return parts;
}

}  // namespace trainctl::tokenizer

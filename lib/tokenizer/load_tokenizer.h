#pragma once
// Loading a byte-level BPE tokenizer from files, checked: anything trainctl cannot encode
// exactly as Hugging Face `tokenizers` does, and any vocabulary that could not give every
// text back or whose ids do not number its tokens (tokenizer/vocab_parts.h), is refused
// with an InputError naming the file and the problem (exit 2 at the CLI).
//
// Supported: a tokenizer.json whose model is BPE (vocab, merges as "a b" strings or
// [a, b] pairs; dropout, continuing_subword_prefix and end_of_word_suffix unset), with no
// normalizer, a ByteLevel pre-tokenizer (use_regex: the GPT-2 pattern) or a Split by the
// GPT-2 or Llama 3 pattern (behavior Isolated) followed by ByteLevel(use_regex: false),
// and a ByteLevel decoder; added tokens without lstrip/rstrip/single_word. And GPT-2's
// vocab.json + merges.txt (the GPT-2 pattern; <|endoftext|> is a special token).
#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace trainctl::tokenizer {

struct LoadedTokenizer {
  Tokenizer tokenizer;
  // The files it was read from (tokenizer.json, or vocab.json and merges.txt), to copy
  // next to prepared data or an exported model.
  std::vector<std::filesystem::path> files;
  // "fnv1a64:<16 hex digits>" over the files' bytes in order: identifies the vocabulary.
  std::string hash;
};

// `path`: a tokenizer.json, a vocab.json (merges.txt beside it), or a directory holding
// either (tokenizer.json preferred).
LoadedTokenizer load_tokenizer(const std::filesystem::path& path);

// The files load_tokenizer(path) reads, in the order its hash covers them (InputError when
// a directory holds neither kind or merges.txt is missing).
std::vector<std::filesystem::path> tokenizer_files(const std::filesystem::path& path);

// LoadedTokenizer::hash of `files` (as tokenizer_files gives them) from their bytes alone,
// without parsing: how a prepared directory's copy is checked against its manifest.
std::string hash_tokenizer_files(const std::vector<std::filesystem::path>& files);

// The parts of a tokenizer.json document; `source` names it in messages.
TokenizerParts parse_tokenizer_json(const std::string& text, const std::string& source);

// The parts of GPT-2's vocab.json and merges.txt.
TokenizerParts parse_gpt2_files(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& vocab_source, const std::string& merges_source);

// FNV-1a (64 bit) of `bytes`, continuing from `state` (start: kFnvOffset).
inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
uint64_t fnv1a64(std::string_view bytes, uint64_t state = kFnvOffset);

}  // namespace trainctl::tokenizer

// `trainctl data prepare|encode|decode`: options and help; the work is in data_commands.cpp.
#include "cli.h"
#include "data_commands.h"

namespace trainctl::app {
namespace {

CLI::App* add_prepare(CLI::App* data, DataPrepareArgs& args) {
  CLI::App* cmd = data->add_subcommand(
      "prepare", "Tokenize text (a file, a folder of them, or JSONL) into llm.c token shards");
  cmd->add_option("--tokenizer", args.tokenizer,
                  "A Hugging Face tokenizer.json (byte-level BPE), GPT-2's vocab.json "
                  "(merges.txt beside it), or a directory holding either")
      ->required();
  cmd->add_option("--input", args.input,
                  "A UTF-8 text file, a *.jsonl file (a string field \"text\" per line), or a "
                  "directory of *.txt / *.jsonl files")
      ->required();
  cmd->add_option("--out", args.out, "Output directory (created)")->required();
  cmd->add_option("--val-fraction", args.val_fraction,
                  "Share of the tokens (the tail) held out for validation")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.5));
  cmd->add_option("--threads", args.threads, "Encoding threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shard-tokens", args.shard_tokens, "Tokens per .bin file at most")
      ->capture_default_str()
      ->check(CLI::Range(1LL, 2147483647LL));
  cmd->footer(
      "Example:\n  trainctl data prepare --tokenizer tokenizer.json --input corpus/ --out "
      "data/corpus\n\n"
      "Writes DIR/train_NNNNNN.bin and DIR/val_NNNNNN.bin (llm.c format: uint16 tokens, or\n"
      "uint32 (version 2) for a vocabulary over 65536), a copy of the tokenizer files and\n"
      "DIR/manifest.json\n"
      "(token counts, vocab_size, tokenizer hash, shards). Documents are separated by the\n"
      "end-of-text token when the vocabulary has one. Train on it with\n"
      "  data: {type: tokens, path: DIR}\n"
      "and model.vocab_size at least the tokenizer's. Exit code 2 for an unsupported or\n"
      "malformed tokenizer, an input that is empty or not UTF-8.");
  return cmd;
}

struct CodecOptions {
  std::string tokenizer, input, out;
  int threads = 0;
};

}  // namespace

void add_data_command(CLI::App& app, Dispatches& out) {
  auto prepare_args = std::make_shared<DataPrepareArgs>();
  auto codec = std::make_shared<CodecOptions>();
  CLI::App* data =
      app.add_subcommand("data", "Tokenize text into training data with a BPE tokenizer");
  data->require_subcommand(1);
  CLI::App* prepare = add_prepare(data, *prepare_args);
  CLI::App* encode = data->add_subcommand(
      "encode", "Encode one UTF-8 text file into token ids (raw little-endian uint32)");
  CLI::App* decode =
      data->add_subcommand("decode", "Decode token ids (raw little-endian uint32) into text");
  for (CLI::App* cmd : {encode, decode}) {
    cmd->add_option("--tokenizer", codec->tokenizer, "tokenizer.json, vocab.json or a directory")
        ->required();
    cmd->add_option("--input", codec->input, "The file to read")->required();
    cmd->add_option("--out", codec->out, "The file to write")->required();
  }
  encode->add_option("--threads", codec->threads, "Encoding threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  encode->footer(
      "Example:\n  trainctl data encode --tokenizer tokenizer.json --input a.txt --out a.ids "
      "--threads 1\n\nPrints the encoding speed (MB/s) on stderr. The ids equal those of\n"
      "Hugging Face tokenizers' encode(text, add_special_tokens=False).");
  out.push_back({prepare, [prepare_args] { return cmd_data_prepare(*prepare_args); }});
  out.push_back({encode, [codec] {
                   return cmd_data_encode(codec->tokenizer, codec->input, codec->out,
                                          codec->threads);
                 }});
  out.push_back(
      {decode, [codec] { return cmd_data_decode(codec->tokenizer, codec->input, codec->out); }});
}

}  // namespace trainctl::app

// Fuzz target: a checkpoint's metadata.json parser (checkpoint/metadata.h), which decides
// what a resume loads. The input is the file's text. Each document is tried twice: as it
// is (so the checksum check is exercised), and with its metadata_checksum recomputed, as a
// deliberate editor would, so that every field's range check is reached too.
// Checks beyond "no crash": accepted metadata is in range (step >= 1, optimizer step in
// [0, step], at least one file) and survives to_json -> metadata_from_json unchanged.
#include <cstdint>
#include <string>

#include "checkpoint/metadata.h"
#include "checkpoint/metadata_checksum.h"
#include "fuzz_support.h"
#include "util/error.h"

using namespace trainctl;
using nlohmann::json;

namespace {

void check_document(const json& doc) {
  checkpoint::CheckpointMetadata m;
  try {
    m = checkpoint::metadata_from_json(doc, "fuzz/metadata.json");
  } catch (const InputError&) {
    return;  // CheckpointCorrupt or a newer format: the documented refusals
  }
  fuzz::require(m.step >= 1 && m.step <= checkpoint::kMaxCheckpointStep,
                "step out of range accepted");
  fuzz::require(m.optimizer_step >= 0 && m.optimizer_step <= m.step,
                "optimizer_step out of range accepted");
  fuzz::require(!m.files.empty(), "a checkpoint without files accepted");
  fuzz::require(m.data.samples_consumed >= 0, "negative data position accepted");

  // What write_metadata writes: the document, sealed with its checksum from format 2 on.
  json written = checkpoint::to_json(m);
  if (checkpoint::metadata_is_protected(m)) {
    written[checkpoint::kMetadataChecksumKey] = checkpoint::metadata_checksum(written);
  }
  try {
    const json reread = checkpoint::to_json(checkpoint::metadata_from_json(written, "rewritten"));
    fuzz::require(reread == checkpoint::to_json(m),
                  "to_json/metadata_from_json round trip changed the metadata");
  } catch (const InputError&) {
    fuzz::require(false, "metadata written by to_json is refused by metadata_from_json");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const json doc = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;  // not JSON: read_metadata refuses it before this parser
  check_document(doc);
  if (doc.is_object()) {
    json resealed = doc;
    resealed[checkpoint::kMetadataChecksumKey] = checkpoint::metadata_checksum(doc);
    check_document(resealed);
  }
  return 0;
}

// Fuzz target: the job-spec parser (config/load.h), the front door of every command.
// The input is a YAML document; its leading lines of the form `#set key=value` (YAML
// comments, so still part of the document) are also applied as --set overrides.
// Checks beyond "no crash": a spec that parses survives the documented round trip
// (parse_job_spec(to_yaml(s)) == s) and `validate`'s summary of it does not fail.
#include <cstdint>
#include <string>
#include <vector>

#include "config/load.h"
#include "fuzz_support.h"
#include "util/error.h"

using namespace trainctl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > config::kMaxSpecBytes) return 0;  // load_job_spec refuses these unread
  const std::string text(reinterpret_cast<const char*>(data), size);

  std::vector<std::string> overrides;
  size_t at = 0;
  while (text.compare(at, 5, "#set ") == 0) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) break;
    overrides.push_back(text.substr(at + 5, end - at - 5));
    at = end + 1;
  }

  config::JobSpec spec;
  try {
    spec = config::parse_job_spec(text, "fuzz.yaml", "/fuzz", overrides);
  } catch (const InputError&) {
    return 0;  // refused with a message: the documented outcome for bad input
  }
  const std::string summary = config::summary(spec);
  fuzz::require(!summary.empty(), "summary of a valid spec is empty");

  config::JobSpec again;
  try {
    again = config::parse_job_spec(config::to_yaml(spec), "resolved.yaml", "/fuzz");
  } catch (const InputError&) {
    fuzz::require(false, "to_yaml of a valid spec does not parse");
  }
  // spec_path is not part of the document (parse_job_spec leaves it empty on both sides).
  fuzz::require(again == spec, "to_yaml/parse_job_spec round trip changed the spec");
  return 0;
}

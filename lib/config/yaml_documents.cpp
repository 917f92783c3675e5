#include "config/yaml_documents.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <sstream>

namespace trainctl::config::detail {

namespace {

// Records where each document starts and ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> last_start;

  void OnDocumentStart(const YAML::Mark& mark) override { last_start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

DocumentCount count_yaml_documents(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts starts;
  DocumentCount count;
  while (count.documents < 2 && parser.HandleNextDocument(starts)) {
    ++count.documents;
    if (count.documents == 2) count.second = starts.last_start;
  }
  return count;
}

}  // namespace trainctl::config::detail

// A key written in the wrong section is named with the section it belongs to (issue 37,
// item 2), in a file and in a `--set` override alike.
#include "config/spec_keys.h"
#include "test_config_helpers.h"

using trainctl::config::testing::error_of;
using trainctl::config::testing::require_error;

TEST_CASE("config: a key of another section suggests that section", "[config]") {
  require_error(R"(training:
  steps: 10
  lr: 0.001
)",
                "job.yaml:3:3:", "training.lr",
                {"unknown key", "Did you mean `optimizer.lr`?", "Valid keys in `training`"});
  require_error("name: a\n", "--set training.lr=3e-4", "training.lr",
                {"Did you mean `optimizer.lr`?"}, {"training.lr=3e-4"});
  // At the top level too, and for a nested section's key.
  require_error("tp: 2\n", "job.yaml:1:1:", "tp", {"Did you mean `parallel.tp`?"});
  require_error("parallel: {servers: 2}\n", "job.yaml:1:12:", "parallel.servers",
                {"Did you mean `parallel.parameter_server.servers`?"});
  // A key of two other sections names both.
  require_error("training: {every_steps: 5}\n", "job.yaml:1:12:", "training.every_steps",
                {"`checkpoint.every_steps` or `logging.every_steps`"});
  // A typo within the section is still suggested when no other section has the key.
  CHECK(error_of("training: {step: 5}\n").find("Did you mean `steps`?") != std::string::npos);
}

TEST_CASE("config: the key table knows every section", "[config]") {
  using trainctl::config::detail::key_in_other_sections;
  using trainctl::config::detail::section_keys;
  CHECK(key_in_other_sections("training", "lr") == std::vector<std::string>{"optimizer.lr"});
  // A section name is not offered as a value key.
  CHECK(key_in_other_sections("training", "model").empty());
  CHECK(section_keys("nothing").empty());
  CHECK(section_keys("parallel.parameter_server").size() == 2);
}

#include "train/export.h"

#include "checkpoint/safetensors.h"

namespace trainctl::train {

void export_model(const model::Gpt& gpt, const config::JobSpec& spec,
                  const std::filesystem::path& path) {
  std::vector<checkpoint::NamedTensor> tensors;
  const model::ParameterSet& params = gpt.params();
  for (size_t i = 0; i < params.list().size(); ++i) {
    tensors.push_back({params.at(i).name, params.tensor(i)});
  }
  const model::GptConfig& c = gpt.config();
  checkpoint::write_safetensors(path, tensors,
                                {{"format", "pt"},
                                 {"producer", "trainctl " TRAINCTL_VERSION},
                                 {"job", spec.name},
                                 {"vocab_size", std::to_string(c.vocab_size)},
                                 {"block_size", std::to_string(c.max_seq_len)},
                                 {"n_layer", std::to_string(c.n_layer)},
                                 {"n_head", std::to_string(c.n_head)},
                                 {"n_embd", std::to_string(c.d_model)},
                                 {"bias", "true"},
                                 {"tied", "lm_head.weight=transformer.wte.weight"}});
}

}  // namespace trainctl::train

#include "parallel/resident_units.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trainctl::parallel {

namespace {
// The unit holding flat offset `offset`, or -1.
int unit_at(const std::vector<Zero3Unit>& units, int64_t offset) {
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].begin <= offset && offset < units[i].end) return static_cast<int>(i);
  }
  return -1;
}
}  // namespace

ResidentUnits ResidentUnits::find(const std::vector<model::ParamSpec>& specs,
                                  const std::vector<Zero3Unit>& units) {
  const std::vector<int64_t> offsets = model::flat_offsets(specs);
  auto unit_of_offset = [&](int64_t offset) {
    const int unit = unit_at(units, offset);
    if (unit < 0) throw std::logic_error("unit layout: a parameter outside every unit");
    return unit;
  };
  ResidentUnits r;
  int tied_copy = -1, lm_head = -1;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    const int unit = unit_of_offset(offsets[i]);
    const bool embedding = name == "transformer.wte.weight" || name == "model.embed_tokens.weight";
    if (embedding && specs[i].tied_copy) tied_copy = unit;
    if (embedding && !specs[i].tied_copy) r.wte = unit;
    if (name == "transformer.wpe.weight") r.wpe = unit;  // llama has none
    if (name == "transformer.ln_f.weight" || name == "model.norm.weight") r.lnf = unit;
    if (name == "lm_head.weight") lm_head = unit;
  }
  // As Gpt::tied_embedding_param and Gpt::head_weight: the LM head reads its own lm_head,
  // else the tied embedding (the head stage's copy of it with pp > 1).
  if (lm_head < 0) r.tied = tied_copy >= 0 ? tied_copy : r.wte;
  r.head = lm_head >= 0 ? lm_head : r.tied;
  return r;
}

ResidentUnits ResidentUnits::find(const model::Gpt& gpt, const std::vector<Zero3Unit>& units) {
  const ResidentUnits r = find(model::gpt_param_specs(gpt.config(), gpt.shard()), units);
  // The model's own view must agree with the one from its specs.
  auto unit_of = [&](int param) {
    return param < 0 ? -1 : unit_at(units, gpt.params().at(static_cast<size_t>(param)).offset);
  };
  if ((gpt.head_weight() >= 0 && unit_of(gpt.head_weight()) != r.head) ||
      (gpt.tied_embedding_param() >= 0 && unit_of(gpt.tied_embedding_param()) != r.tied)) {
    throw std::logic_error("unit layout: the model's head does not match its parameter specs");
  }
  return r;
}

int64_t ResidentUnits::companion_floats(const std::vector<Zero3Unit>& units) const {
  auto floats = [&](int unit) {
    const Zero3Unit& u = units.at(static_cast<size_t>(unit));
    return u.end - u.begin;
  };
  // The uses reading two units: the embedding (wte, wpe) and the head (ln_f, its weight).
  int64_t most = 0;
  if (wte >= 0 && wpe >= 0) most = std::max(most, std::min(floats(wte), floats(wpe)));
  if (lnf >= 0 && head >= 0 && lnf != head) {
    most = std::max(most, std::min(floats(lnf), floats(head)));
  }
  return most;
}

std::pair<std::vector<int>, std::vector<int>> ResidentUnits::of(model::Gpt::ResidentUse use,
                                                                bool grads) const {
  using Use = model::Gpt::ResidentUse;
  std::vector<int> read, written;
  auto add = [](std::vector<int>& v, int unit) {
    if (unit < 0) throw std::logic_error("unit layout: a resident use of a unit this rank lacks");
    if (std::find(v.begin(), v.end(), unit) == v.end()) v.push_back(unit);
  };
  switch (use) {
    case Use::embedding_forward:
      add(read, wte);
      if (wpe >= 0) add(read, wpe);
      break;
    case Use::head_forward:
      add(read, lnf);
      add(read, head);
      if (grads) add(written, head);
      break;
    case Use::head_backward:
      add(read, lnf);
      add(written, lnf);
      break;
    case Use::embedding_backward:  // reads no parameter
      add(written, wte);
      if (wpe >= 0) add(written, wpe);
      break;
  }
  return {read, written};
}

std::vector<int> block_units(const model::Gpt& gpt, const std::vector<Zero3Unit>& units) {
  std::vector<int> of_block(static_cast<size_t>(gpt.num_blocks()), -1);
  for (size_t i = 0; i < units.size(); ++i) {
    const Zero3Unit& u = units[i];
    if (u.resident) continue;
    // The units come from the specs; the hooks from the model: they must agree.
    if (u.block >= gpt.num_blocks() || gpt.block_param_range(u.block).first != u.begin ||
        gpt.block_param_range(u.block).second > u.end) {
      throw std::logic_error("unit layout: the model's blocks do not match its parameter layout");
    }
    of_block[static_cast<size_t>(u.block)] = static_cast<int>(i);
  }
  return of_block;
}

}  // namespace trainctl::parallel

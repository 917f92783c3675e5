#pragma once
// One metrics.jsonl line as TensorBoard scalars: every number is a scalar tagged with its
// key (loss, val_loss, lr, grad_norm, tokens_per_s, step_ms, comm_ms, pipeline_bubble,
// loss_scale, memory...), a list of numbers one scalar per element (pipeline_idle_ms/0,
// pipeline_idle_ms/1, ...: element i of the list), a boolean 0 or 1 (skipped); `step` is the
// event's step, not a scalar. Fed the same object metrics.jsonl gets, so a metric added there
// reaches TensorBoard too.
#include <nlohmann/json_fwd.hpp>

#include "observe/tb_event.h"

namespace trainctl::observe {

Scalars metric_scalars(const nlohmann::ordered_json& line);

}  // namespace trainctl::observe

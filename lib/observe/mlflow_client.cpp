#include "observe/mlflow_client.h"

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace trainctl::observe {

namespace {

using nlohmann::json;

constexpr size_t kMaxParamValue = 500;  // MLflow's limit on a param's value

MlflowRun run_of(const json& answer) {
  const json& info = answer.at("run").at("info");
  return {info.value("experiment_id", ""), info.value("run_id", ""), info.value("artifact_uri", ""),
          info.value("status", "")};
}

json key_values(const KeyValues& kv) {
  json out = json::array();
  for (const auto& [k, v] : kv) out.push_back({{"key", k}, {"value", v}});
  return out;
}

void flatten(const YAML::Node& node, const std::string& prefix, KeyValues& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
    return;
  }
  std::string value;
  if (node.IsScalar()) {
    value = node.Scalar();
  } else {
    YAML::Emitter e;
    e << YAML::Flow << node;
    value = e.c_str();
  }
  if (value.size() > kMaxParamValue) value.resize(kMaxParamValue);
  out.emplace_back(prefix, value);
}

}  // namespace

MlflowClient::MlflowClient(std::string tracking_uri, std::chrono::milliseconds timeout)
    : uri_(std::move(tracking_uri)), http_(timeout) {
  while (!uri_.empty() && uri_.back() == '/') uri_.pop_back();
}

std::string MlflowClient::call(const std::string& method, const std::string& endpoint,
                               const std::string& body) {
  const HttpResponse r = http_.json(method, uri_ + "/api/2.0/mlflow/" + endpoint, body);
  if (!r.ok()) {
    throw std::runtime_error("MLflow at " + uri_ + ": " + endpoint + ": " + r.problem());
  }
  return r.body;
}

std::string MlflowClient::experiment_id(const std::string& name) {
  const HttpResponse found = http_.json(
      "GET",
      uri_ + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + url_path_escape(name),
      "");
  if (found.ok()) return json::parse(found.body).at("experiment").at("experiment_id");
  if (found.status != 404) {
    throw std::runtime_error("MLflow at " + uri_ + ": experiments/get-by-name: " + found.problem());
  }
  const std::string made = call("POST", "experiments/create", json{{"name", name}}.dump());
  return json::parse(made).at("experiment_id");
}

MlflowRun MlflowClient::create_run(const std::string& experiment_id, const std::string& run_name,
                                   int64_t start_ms, const KeyValues& tags) {
  const json body = {{"experiment_id", experiment_id},
                     {"run_name", run_name},
                     {"start_time", start_ms},
                     {"tags", key_values(tags)}};
  return run_of(json::parse(call("POST", "runs/create", body.dump())));
}

MlflowRun MlflowClient::get_run(const std::string& run_id) {
  return run_of(json::parse(call("GET", "runs/get?run_id=" + url_path_escape(run_id), "")));
}

void MlflowClient::log_batch(const std::string& run_id, int64_t step, int64_t time_ms,
                             const Scalars& metrics, const KeyValues& params,
                             const KeyValues& tags) {
  json m = json::array();
  for (const auto& [key, value] : metrics) {
    m.push_back({{"key", key}, {"value", value}, {"timestamp", time_ms}, {"step", step}});
  }
  const json body = {{"run_id", run_id},
                     {"metrics", m},
                     {"params", key_values(params)},
                     {"tags", key_values(tags)}};
  call("POST", "runs/log-batch", body.dump());
}

void MlflowClient::set_status(const std::string& run_id, const std::string& status,
                              int64_t end_ms) {
  json body = {{"run_id", run_id}, {"status", status}};
  if (status != "RUNNING") body["end_time"] = end_ms;
  call("POST", "runs/update", body.dump());
}

void MlflowClient::upload_artifact(const MlflowRun& run, const std::filesystem::path& file,
                                   const std::string& name) {
  const std::string scheme = "mlflow-artifacts:";
  if (run.artifact_uri.rfind(scheme, 0) != 0) {
    throw std::runtime_error("MLflow at " + uri_ + ": the run's artifact store is " +
                             run.artifact_uri +
                             ", which its REST API cannot write: start the server with artifact "
                             "serving (mlflow server --serve-artifacts, the default since 2.0)");
  }
  std::string path = run.artifact_uri.substr(scheme.size());
  while (!path.empty() && path.front() == '/') path.erase(0, 1);
  const std::string url =
      uri_ + "/api/2.0/mlflow-artifacts/artifacts/" + url_path_escape(path + "/" + name);
  const HttpResponse r = http_.put_file(url, file);
  if (!r.ok()) {
    throw std::runtime_error("MLflow at " + uri_ + ": uploading " + file.string() + ": " +
                             r.problem());
  }
}

KeyValues spec_params(const std::string& resolved_yaml) {
  KeyValues out;
  flatten(YAML::Load(resolved_yaml), "", out);
  return out;
}

}  // namespace trainctl::observe

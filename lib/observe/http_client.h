#pragma once
// A small blocking HTTP client over libcurl for experiment trackers (observe/mlflow_client.h):
// one request at a time, each with its own deadline, so a dead or slow server costs at most
// that long. One object owns one curl handle (connections are reused); not thread-safe.
#include <chrono>
#include <filesystem>
#include <string>

namespace trainctl::observe {

struct HttpResponse {
  long status = 0;    // HTTP status; 0 when no response arrived
  std::string body;   // the response body
  std::string error;  // curl's text when the request failed before a response
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
  // "HTTP 404: <body>" or curl's error, for messages.
  std::string problem() const;
};

class HttpClient {
 public:
  explicit HttpClient(std::chrono::milliseconds timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `method` GET | POST | PATCH | PUT with a JSON body (empty: none).
  HttpResponse json(const std::string& method, const std::string& url, const std::string& body);
  // PUT of a file's bytes as application/octet-stream.
  HttpResponse put_file(const std::string& url, const std::filesystem::path& file);

 private:
  void* curl_;  // CURL*, kept out of this header
  std::chrono::milliseconds timeout_;
};

// `text` with every byte outside [A-Za-z0-9-._~/] percent-encoded (a URL path).
std::string url_path_escape(const std::string& text);

}  // namespace trainctl::observe

#include "observe/http_client.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

namespace trainctl::observe {

namespace {

size_t append_body(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  void add(const char* h) { list = curl_slist_append(list, h); }
};

HttpResponse perform(CURL* c) {
  HttpResponse r;
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    r.error = curl_easy_strerror(code);
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

void reset(CURL* c, const std::string& url, std::chrono::milliseconds timeout) {
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(timeout.count()));
  // No signals: the worker's threads keep their signal masks (SIGALRM would hit any thread).
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
}

}  // namespace

std::string HttpResponse::problem() const {
  if (!error.empty()) return error;
  std::string text = "HTTP " + std::to_string(status);
  if (!body.empty()) text += ": " + body.substr(0, 300);
  return text;
}

HttpClient::HttpClient(std::chrono::milliseconds timeout)
    : curl_(curl_easy_init()), timeout_(timeout) {
  if (!curl_) throw std::runtime_error("libcurl could not make a handle");
}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

HttpResponse HttpClient::json(const std::string& method, const std::string& url,
                              const std::string& body) {
  CURL* c = static_cast<CURL*>(curl_);
  reset(c, url, timeout_);
  HeaderList headers;
  headers.add("Content-Type: application/json");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (!body.empty() || method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  return perform(c);
}

HttpResponse HttpClient::put_file(const std::string& url, const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {0, "", "cannot read " + file.string()};
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  CURL* c = static_cast<CURL*>(curl_);
  reset(c, url, timeout_);
  HeaderList headers;
  headers.add("Content-Type: application/octet-stream");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, bytes.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(bytes.size()));
  return perform(c);
}

std::string url_path_escape(const std::string& text) {
  std::string out;
  for (const unsigned char ch : text) {
    if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/') {
      out += static_cast<char>(ch);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", ch);
      out += hex;
    }
  }
  return out;
}

}  // namespace trainctl::observe

// Test support for the origin tests: sample directories, packing, and a raw libcurl HTTP helper that sends paths
// as they are (no "../" squashing) so that traversal attempts reach the server unchanged.
#pragma once

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "datavo/content_hash.hpp"
#include "datavo/origin.hpp"
#include "support/temp_dir.hpp"

namespace datavo::origintest {

inline void write_text(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string sha256_hex(std::string_view bytes) {
  Sha256Hasher hasher;
  hasher.update(bytes.data(), bytes.size());
  return hasher.finish().hex();
}

// The payload of member `<id>.<key>` in the sample directories made below.
inline std::string payload(const std::string& id, const std::string& key) { return key + " of " + id + "\n"; }

// Writes `<dir>/<id>.<key>` for every id and key, with payload(id, key).
inline void make_sample_dir(const std::string& dir, const std::vector<std::string>& ids,
                            const std::vector<std::string>& keys = {"audio.wav", "transcript.txt"}) {
  std::filesystem::create_directories(dir);
  for (const auto& id : ids) {
    for (const auto& key : keys) write_text(dir + "/" + id + "." + key, payload(id, key));
  }
}

// "utt_0000", "utt_0001", ... (first, first + count).
inline std::vector<std::string> sample_ids(int first, int count) {
  std::vector<std::string> ids;
  for (int i = first; i < first + count; ++i) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "utt_%04d", i);
    ids.emplace_back(buffer);
  }
  return ids;
}

inline PackReport pack_or_fail(const std::string& source, const std::string& store, const std::string& dataset,
                               std::size_t per_shard) {
  PackOptions options;
  options.source = source;
  options.store = store;
  options.dataset = dataset;
  options.samples_per_shard = per_shard;
  auto report = pack_dataset(options);
  EXPECT_TRUE(report) << report.error().message;
  return report ? *report : PackReport{};
}

struct HttpResult {
  long status = 0;  // 0: the request failed
  std::string body;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string error;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// One HTTP exchange over libcurl; the path is sent verbatim (CURLOPT_PATH_AS_IS).
inline HttpResult http(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
                       const std::string& body = {}) {
  static const bool initialised = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)initialised;
  HttpResult result;
  CURL* curl = curl_easy_init();
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  auto on_body = +[](char* data, size_t size, size_t count, void* user) -> size_t {
    static_cast<HttpResult*>(user)->body.append(data, size * count);
    return size * count;
  };
  auto on_header = +[](char* data, size_t size, size_t count, void* user) -> size_t {
    std::string line(data, size * count);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      std::string value = line.substr(colon + 1);
      while (!value.empty() && (value.front() == ' ')) value.erase(0, 1);
      while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
      static_cast<HttpResult*>(user)->headers[name] = value;
    }
    return size * count;
  };
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 20L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &result);
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  } else if (method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  } else {
    result.error = curl_easy_strerror(code);
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return result;
}

}  // namespace datavo::origintest

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <stdexcept>

#include "agent/providers/http_client.hpp"

namespace d2k::agent {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

constexpr std::size_t kMaxBody = 64u << 20;  // a reply larger than this is cut off and reported as an error

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  if (body->size() + size * n > kMaxBody) return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  body->append(data, size * n);
  return size * n;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    headers->clear();  // a new response (after 100 Continue or a redirect): keep only the final one's headers
  } else if (auto colon = line.find(':'); colon != std::string_view::npos) {
    (*headers)[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  return size * n;
}

HttpResponse::Transport classify(CURLcode c) {
  switch (c) {
    case CURLE_OPERATION_TIMEDOUT: return HttpResponse::Transport::timeout;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY: return HttpResponse::Transport::connect_failed;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return HttpResponse::Transport::dropped;
    default: return HttpResponse::Transport::error;
  }
}

}  // namespace

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::string_view transport_name(HttpResponse::Transport t) {
  switch (t) {
    case HttpResponse::Transport::ok: return "ok";
    case HttpResponse::Transport::timeout: return "timeout";
    case HttpResponse::Transport::connect_failed: return "connect_failed";
    case HttpResponse::Transport::dropped: return "dropped";
    case HttpResponse::Transport::error: return "error";
  }
  return "?";
}

CurlHttpClient::CurlHttpClient() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
  });
}

HttpResponse CurlHttpClient::post(const std::string& url, const std::map<std::string, std::string>& headers,
                                  const std::string& body, std::chrono::milliseconds timeout) {
  HttpResponse r;
  CURL* h = curl_easy_init();
  if (!h) {
    r.error = "curl_easy_init failed";
    return r;
  }
  curl_slist* list = nullptr;
  for (const auto& [k, v] : headers) list = curl_slist_append(list, (k + ": " + v).c_str());
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip for large bodies
  char errbuf[CURL_ERROR_SIZE] = {0};
  long timeout_ms = std::max<long>(1, static_cast<long>(timeout.count()));
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, std::min<long>(timeout_ms, 30'000L));
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");  // whatever libcurl can decode
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode c = curl_easy_perform(h);
  if (c == CURLE_OK) {
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    r.transport = HttpResponse::Transport::ok;
    r.status = static_cast<int>(status);
  } else {
    r.transport = classify(c);
    r.error = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(c));
    if (c == CURLE_WRITE_ERROR) r.error = "reply body over 64 MiB";
    r.status = 0;
    r.headers.clear();
    r.body.clear();
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  return r;
}

}  // namespace d2k::agent

#pragma once
// The HTTP boundary of the providers: an interface (tests may fake it) and its libcurl implementation.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace d2k::agent {

struct HttpResponse {
  // How the exchange ended at the transport level. Only `ok` carries a status, headers and body.
  enum class Transport {
    ok,              // a complete HTTP response arrived (any status)
    timeout,         // the request timed out (connect or total)
    connect_failed,  // no connection (refused, unresolved host)
    dropped,         // the connection broke before a complete response (empty reply, reset)
    error,           // anything else (TLS verification, bad URL, ...): not worth retrying
  };
  Transport transport = Transport::error;
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased; the last value wins
  std::string body;
  std::string error;  // transport != ok: what failed, in words

  std::optional<std::string> header(std::string_view name) const;  // case-insensitive
};

std::string_view transport_name(HttpResponse::Transport t);

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // POSTs `body`; never throws for network failures (they are a Transport value).
  virtual HttpResponse post(const std::string& url, const std::map<std::string, std::string>& headers,
                            const std::string& body, std::chrono::milliseconds timeout) = 0;
};

// libcurl, one easy handle per request (safe to use from several threads). HTTPS with the system's CA store.
class CurlHttpClient final : public HttpClient {
 public:
  CurlHttpClient();
  HttpResponse post(const std::string& url, const std::map<std::string, std::string>& headers, const std::string& body,
                    std::chrono::milliseconds timeout) override;
};

}  // namespace d2k::agent

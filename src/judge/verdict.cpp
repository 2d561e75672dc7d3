#include "judge/verdict.hpp"

#include <fmt/format.h>

#include <cmath>

namespace d2k::judge {

using nlohmann::json;

namespace {

std::optional<json> parse_object(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The candidate texts that may hold the JSON object, best first.
std::optional<json> find_object(const std::string& reply) {
  if (auto j = parse_object(reply)) return j;
  // fenced blocks: ```json ... ``` or ``` ... ```
  std::size_t pos = 0;
  while ((pos = reply.find("```", pos)) != std::string::npos) {
    std::size_t body = reply.find('\n', pos);
    if (body == std::string::npos) break;
    std::size_t end = reply.find("```", body);
    if (end == std::string::npos) break;
    if (auto j = parse_object(reply.substr(body + 1, end - body - 1))) return j;
    pos = end + 3;
  }
  std::size_t a = reply.find('{'), b = reply.rfind('}');
  if (a != std::string::npos && b != std::string::npos && b > a)
    if (auto j = parse_object(reply.substr(a, b - a + 1))) return j;
  return std::nullopt;
}

std::optional<long long> as_line(const json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::floor(d) == d) return static_cast<long long>(d);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Verdict> parse_verdict(const std::string& reply, std::string& error) {
  auto j = find_object(reply);
  if (!j) {
    error = "the reply holds no JSON object (reply with one JSON object: reasoning, score, citations)";
    return std::nullopt;
  }
  Verdict v;
  if (!j->contains("score")) {
    error = "the JSON object has no \"score\"";
    return std::nullopt;
  }
  const auto& sc = (*j)["score"];
  if (!sc.is_number()) {
    error = fmt::format("\"score\" must be a number (one of 0, 25, 50, 75, 100), not {}", sc.dump());
    return std::nullopt;
  }
  v.score = sc.get<double>();
  if (j->contains("reasoning")) {
    if (!(*j)["reasoning"].is_string()) {
      error = "\"reasoning\" must be a string";
      return std::nullopt;
    }
    v.reasoning = (*j)["reasoning"].get<std::string>();
  }
  if (j->contains("citations") && !(*j)["citations"].is_null()) {
    const auto& cs = (*j)["citations"];
    if (!cs.is_array()) {
      error = "\"citations\" must be an array of {file, start_line, end_line, quote}";
      return std::nullopt;
    }
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const auto& c = cs[i];
      if (!c.is_object()) {
        error = fmt::format("citations[{}] must be an object {{file, start_line, end_line, quote}}", i);
        return std::nullopt;
      }
      Citation ci;
      auto f = c.find("file");
      auto sl = c.find("start_line");
      auto el = c.find("end_line");
      auto q = c.find("quote");
      if (f == c.end() || !f->is_string() || q == c.end() || !q->is_string() || sl == c.end() || el == c.end()) {
        error = fmt::format("citations[{}] needs \"file\" and \"quote\" (strings) and \"start_line\", \"end_line\" "
                            "(integers)", i);
        return std::nullopt;
      }
      auto s1 = as_line(*sl), e1 = as_line(*el);
      if (!s1 || !e1) {
        error = fmt::format("citations[{}]: \"start_line\" and \"end_line\" must be integers", i);
        return std::nullopt;
      }
      ci.file = f->get<std::string>();
      ci.quote = q->get<std::string>();
      ci.start_line = *s1;
      ci.end_line = *e1;
      v.citations.push_back(std::move(ci));
    }
  }
  return v;
}

std::vector<std::string> check_verdict(Verdict& v, const Snapshot& s) {
  std::vector<std::string> problems;
  double score = v.score.value_or(-1);
  bool anchor = false;
  for (int a : kAnchors) anchor = anchor || score == a;
  if (!anchor) {
    if (score < 0 || score > 100)
      problems.push_back(fmt::format("score {} is outside 0..100; use one of the anchors 0, 25, 50, 75, 100", score));
    else
      problems.push_back(fmt::format("score {} is not an anchor; use one of 0, 25, 50, 75, 100", score));
  }
  if (normalize_ws(v.reasoning).empty()) problems.push_back("\"reasoning\" is empty; explain the score first");
  if (v.citations.size() > kMaxCitations)
    problems.push_back(fmt::format("{} citations given; give 1 to {}", v.citations.size(), kMaxCitations));
  int verified = 0;
  for (std::size_t i = 0; i < v.citations.size(); ++i) {
    verify_citation(v.citations[i], s);
    if (v.citations[i].verified)
      ++verified;
    else
      problems.push_back(fmt::format("citations[{}] failed verification: {}", i, v.citations[i].why));
  }
  if (score > 0 && verified == 0 && v.citations.empty())
    problems.push_back("a score above 0 needs at least one citation of the code that shows the property");
  return problems;
}

}  // namespace d2k::judge

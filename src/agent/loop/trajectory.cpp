#include "agent/loop/trajectory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace d2k::agent {

using nlohmann::json;

namespace {

[[noreturn]] void io_fail(const std::string& what, const std::filesystem::path& p) {
  throw std::runtime_error(what + " " + p.string() + ": " + std::strerror(errno));
}

// Cuts the file back to its last newline: a partial line left by a crash would otherwise glue itself to the
// next record and make both unreadable.
void cut_torn_tail(int fd, const std::filesystem::path& p) {
  struct stat st{};
  if (::fstat(fd, &st) != 0) io_fail("stat", p);
  off_t size = st.st_size;
  if (size == 0) return;
  off_t keep = size;
  char c;
  while (keep > 0) {
    if (::pread(fd, &c, 1, keep - 1) != 1) io_fail("read", p);
    if (c == '\n') break;
    --keep;
  }
  if (keep != size) {
    if (::ftruncate(fd, keep) != 0) io_fail("truncate", p);
    if (::fsync(fd) != 0) io_fail("fsync", p);
  }
}

}  // namespace

TrajectoryWriter::TrajectoryWriter(const std::filesystem::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) io_fail("cannot open the trajectory", path);
  cut_torn_tail(fd_, path);
}

TrajectoryWriter::~TrajectoryWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TrajectoryWriter::append(const json& record) {
  // Invalid UTF-8 from a tool's output must not make the record unwritable: replace it.
  std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace);
  line += '\n';
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      io_fail("cannot append to the trajectory", path_);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd_) != 0) io_fail("cannot fsync the trajectory", path_);
}

TrajectoryRead read_trajectory(const std::filesystem::path& path) {
  TrajectoryRead r;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    r.error = "cannot read " + path.string();
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    bool complete = eol != std::string::npos;
    std::string line = text.substr(pos, complete ? eol - pos : std::string::npos);
    pos = complete ? eol + 1 : text.size();
    ++line_no;
    if (line.empty()) continue;
    auto j = json::parse(line, nullptr, false);
    bool last = pos >= text.size();
    if (j.is_discarded() || !j.is_object() || !complete) {
      if (last) {
        r.torn_tail = true;
      } else if (r.error.empty()) {
        r.error = path.string() + ":" + std::to_string(line_no) + ": not a JSON object";
      }
      continue;
    }
    r.records.push_back(std::move(j));
  }
  return r;
}

json message_to_json(const Message& m) {
  json j{{"role", role_name(m.role)}, {"text", m.text}};
  if (!m.tool_calls.empty()) {
    auto& calls = j["tool_calls"] = json::array();
    for (const auto& c : m.tool_calls) {
      json cj{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}};
      if (!c.arguments_text.empty()) cj["arguments_text"] = c.arguments_text;
      if (!c.arguments_error.empty()) cj["arguments_error"] = c.arguments_error;
      calls.push_back(std::move(cj));
    }
  }
  if (m.role == Role::tool) {
    j["tool_call_id"] = m.tool_call_id;
    j["is_error"] = m.is_error;
  }
  return j;
}

Message message_from_json(const json& j) {
  try {
    Message m;
    const std::string role = j.at("role").get<std::string>();
    if (role == "system") m.role = Role::system;
    else if (role == "user") m.role = Role::user;
    else if (role == "assistant") m.role = Role::assistant;
    else if (role == "tool") m.role = Role::tool;
    else throw std::runtime_error("unknown role '" + role + "'");
    m.text = j.value("text", "");
    if (auto it = j.find("tool_calls"); it != j.end()) {
      for (const auto& cj : *it) {
        ToolCall c;
        c.id = cj.at("id").get<std::string>();
        c.name = cj.at("name").get<std::string>();
        c.arguments = cj.value("arguments", json::object());
        c.arguments_text = cj.value("arguments_text", "");
        c.arguments_error = cj.value("arguments_error", "");
        m.tool_calls.push_back(std::move(c));
      }
    }
    if (m.role == Role::tool) {
      m.tool_call_id = j.at("tool_call_id").get<std::string>();
      m.is_error = j.value("is_error", false);
    }
    return m;
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string("malformed message record: ") + e.what());
  }
}

Usage usage_from_json(const json& j) {
  Usage u;
  if (!j.is_object()) return u;
  u.input_tokens = j.value("input_tokens", 0LL);
  u.cached_input_tokens = j.value("cached_input_tokens", 0LL);
  u.cache_write_tokens = j.value("cache_write_tokens", 0LL);
  u.output_tokens = j.value("output_tokens", 0LL);
  u.reasoning_tokens = j.value("reasoning_tokens", 0LL);
  u.cost_usd = j.value("cost_usd", 0.0);
  u.reported = j.value("reported", false);
  return u;
}

}  // namespace d2k::agent

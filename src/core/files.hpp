#pragma once
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>

namespace d2k {

// Reads a whole file; nullopt if it cannot be read or is larger than max_bytes.
std::optional<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes = 64u << 20);

// Writes via a temporary file and rename, so a reader never sees a partial file.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// True when `text` is valid UTF-8.
bool is_valid_utf8(const std::string& text);

}  // namespace d2k

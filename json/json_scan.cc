#include "json/json_scan.h"

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace maskd::internal {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

absl::Status ScanError(std::string_view what, std::string_view problem, size_t offset) {
  return absl::InvalidArgumentError(absl::StrCat(absl::string_view(what.data(), what.size()), ": ",
                                                 absl::string_view(problem.data(), problem.size()),
                                                 " at byte offset ", offset));
}

}  // namespace

absl::Status CheckJsonStructure(std::string_view text, const JsonScanLimits& limits,
                                std::string_view what) {
  const size_t n = text.size();
  size_t i = 0;
  // A UTF-8 byte order mark, which nlohmann and simdjson skip.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < n && IsJsonSpace(text[i])) ++i;
  if (i == n) return absl::OkStatus();  // empty: the parser's error
  // members[k]: members seen so far in the k-th open container (objects
  // only counted; arrays hold kArray).
  constexpr uint32_t kArray = UINT32_MAX;
  std::vector<uint32_t> members;
  size_t depth = 0;
  const char first = text[i];
  if (first == '[' || first == '{') {
    for (; i < n; ++i) {
      const char c = text[i];
      if (c == '"') {
        // Skip the string; an unterminated one is the parser's error.
        for (++i; i < n && text[i] != '"'; ++i) {
          if (text[i] == '\\') ++i;
        }
        if (i >= n) return absl::OkStatus();
      } else if (c == '[' || c == '{') {
        ++depth;
        if (limits.max_depth != 0 && depth > limits.max_depth) {
          return ScanError(what,
                           absl::StrCat("nested too deeply (more than ", limits.max_depth,
                                        " levels of arrays and objects",
                                        limits.depth_limit_name ? ": " : "",
                                        limits.depth_limit_name ? limits.depth_limit_name : "",
                                        ")"),
                           i);
        }
        if (limits.max_object_members != 0) members.push_back(c == '{' ? 0 : kArray);
      } else if (c == ']' || c == '}') {
        if (depth == 0) return absl::OkStatus();  // unmatched: the parser's error
        --depth;
        if (limits.max_object_members != 0) members.pop_back();
        if (depth == 0) {
          ++i;
          break;
        }
      } else if (c == ':' && limits.max_object_members != 0 && !members.empty() &&
                 members.back() != kArray) {
        if (++members.back() > limits.max_object_members) {
          return ScanError(what, absl::StrCat("object with more than ", limits.max_object_members,
                                              " members"),
                           i);
        }
      }
    }
    if (depth != 0) return absl::OkStatus();  // unterminated: the parser's error
  } else if (first == '"') {
    for (++i; i < n && text[i] != '"'; ++i) {
      if (text[i] == '\\') ++i;
    }
    if (i >= n) return absl::OkStatus();
    ++i;
  } else {
    // A scalar: up to whitespace, a structural character or a NUL.
    while (i < n && !IsJsonSpace(text[i]) && text[i] != '\0' && text[i] != '[' &&
           text[i] != '{' && text[i] != ']' && text[i] != '}' && text[i] != ',' &&
           text[i] != ':' && text[i] != '"') {
      ++i;
    }
  }
  while (i < n && IsJsonSpace(text[i])) ++i;
  if (i < n) {
    return ScanError(what,
                     text[i] == '\0' ? "NUL byte after the JSON document"
                                     : "trailing bytes after the JSON document",
                     i);
  }
  return absl::OkStatus();
}

std::string Excerpt(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t head = max / 2, tail = s.size() - max / 2;
  while (head > 0 && (static_cast<unsigned char>(s[head]) & 0xC0) == 0x80) --head;
  while (tail < s.size() && (static_cast<unsigned char>(s[tail]) & 0xC0) == 0x80) ++tail;
  return absl::StrCat(absl::string_view(s.data(), head), "...(", tail - head, " bytes)...",
                      absl::string_view(s.data() + tail, s.size() - tail));
}

}  // namespace maskd::internal

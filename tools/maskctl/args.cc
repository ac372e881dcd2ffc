#include "tools/maskctl/args.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace maskctl {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& args,
                                 const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 3 || a[0] != '-' || a[1] != '-') {
      out.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      out.values_[name] = "true";
    } else if (value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        }
        value = args[++i];
      }
      out.values_[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return out;
}

std::optional<std::string> Args::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<std::string> Args::Require(const std::string& name) const {
  auto v = Get(name);
  if (!v) return absl::InvalidArgumentError(absl::StrCat("missing required flag --", name));
  return *v;
}

absl::StatusOr<uint64_t> Args::GetUint(const std::string& name, uint64_t fallback) const {
  auto v = Get(name);
  if (!v) return fallback;
  uint64_t out;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": not an unsigned integer: '", *v, "'"));
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> Args::GetUintList(const std::string& name) const {
  std::vector<uint32_t> out;
  auto v = Get(name);
  if (!v || v->empty()) return out;
  for (absl::string_view part : absl::StrSplit(*v, ',')) {
    uint32_t x;
    if (!absl::SimpleAtoi(part, &x)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": not a list of unsigned integers: '", *v, "'"));
    }
    out.push_back(x);
  }
  return out;
}

absl::StatusOr<std::string> ReadFileArg(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  text << in.rdbuf();
  return text.str();
}

}  // namespace maskctl

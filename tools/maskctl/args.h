// Argument parsing shared by maskctl subcommands: "--name value",
// "--name=value", boolean "--name", and positional arguments; and the
// FILE convention (a path, or "-" for standard input).
#ifndef MASKD_TOOLS_MASKCTL_ARGS_H_
#define MASKD_TOOLS_MASKCTL_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace maskctl {

class Args {
 public:
  // `value_flags` take a value, `bool_flags` do not; names without "--".
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& args,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  // InvalidArgument naming the flag when missing.
  absl::StatusOr<std::string> Require(const std::string& name) const;
  // Parsed unsigned integer; `fallback` when absent; error when malformed.
  absl::StatusOr<uint64_t> GetUint(const std::string& name, uint64_t fallback) const;
  // Comma-separated unsigned integers ("1,2,3"); empty when absent.
  absl::StatusOr<std::vector<uint32_t>> GetUintList(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// A FILE argument's content: the file at `path`, or standard input for "-".
// NotFound naming the file when it cannot be read.
absl::StatusOr<std::string> ReadFileArg(const std::string& path);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_ARGS_H_

// Helpers shared by maskctl's online subcommands (online_*.cc).
#ifndef MASKD_TOOLS_MASKCTL_ONLINE_UTIL_H_
#define MASKD_TOOLS_MASKCTL_ONLINE_UTIL_H_


#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/client.h"
#include "tools/maskctl/args.h"
#include "tools/maskctl/command.h"

namespace maskctl {

// An online form: its flags are --tokenizer NAME's, CONSTRAINT's
// (constraint_flags.h) and `own`.
Form OnlineConstraintForm(std::string usage, FlagNames own_value, FlagNames own_bool);
// Connects to ctx.addr; error when --addr is missing.
absl::StatusOr<std::unique_ptr<maskd::Client>> OnlineConnect(const Context& ctx);
// The CompileRequest the flags name: --tokenizer NAME and CONSTRAINT
// (constraint_flags.h, read as the offline forms read it: a FILE's content is
// sent), its options in CompileRequest.options.
// InvalidArgument naming the missing or misused flag.
absl::StatusOr<maskd::v1::CompileRequest> CompileRequestFromFlags(const Args& args);
// A JSON string literal (quotes and escapes).
std::string JsonString(const std::string& s);
std::string Hex(const std::string& bytes);
// A uniformly random allowed token of `row`, preferring tokens not in
// `avoid` (sorted, e.g. EOS ids) when any other is allowed; -1 when none.
int64_t RandomAllowed(absl::Span<const uint32_t> row, absl::Span<const uint32_t> avoid,
                      std::mt19937_64& rng);

}  // namespace maskctl

#endif  // MASKD_TOOLS_MASKCTL_ONLINE_UTIL_H_

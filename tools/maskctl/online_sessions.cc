#include "tools/maskctl/online_sessions.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace maskctl {

absl::StatusOr<ServerTokenizer> FindServerTokenizer(maskd::Client& client, const std::string& name) {
  auto list = client.ListTokenizers();
  if (!list.ok()) return list.status();
  for (const auto& t : *list) {
    if (t.name() != name) continue;
    ServerTokenizer out;
    out.vocab_size = t.vocab_size();
    out.eos_ids.assign(t.eos_ids().begin(), t.eos_ids().end());
    std::sort(out.eos_ids.begin(), out.eos_ids.end());
    out.eos_ids.erase(std::unique(out.eos_ids.begin(), out.eos_ids.end()), out.eos_ids.end());
    return out;
  }
  return absl::NotFoundError(absl::StrCat("unknown tokenizer '", name, "'"));
}

absl::Status SessionSet::Create(const maskd::v1::CompileRequest& compile, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    auto s = client_->CreateSession(compile);
    if (!s.ok()) return absl::Status(s.status().code(), absl::StrCat("CreateSession: ", s.status().ToString()));
    ids_.push_back(s->session_id());
  }
  return absl::OkStatus();
}

void SessionSet::CloseAll() {
  for (uint64_t id : ids_) (void)client_->CloseSession(id);
  ids_.clear();
}

}  // namespace maskctl

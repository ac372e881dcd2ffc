#include "service/client_identity.h"

#include <array>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/auth_context.h"
#include "service/peer_credentials.h"

namespace maskd {
namespace {

constexpr std::array<absl::string_view, 4> kNames = {"connection", "uid", "header", "tls"};
constexpr size_t kMaxIdBytes = 128;

// 1 to kMaxIdBytes of [A-Za-z0-9._:@/+-]: an id that reads back unambiguously
// in a refusal's message and cannot carry control bytes into the log.
bool ValidId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("._:@/+-").find(c) == absl::string_view::npos) {
      return false;
    }
  }
  return true;
}

std::string ConnectionKey(const grpc::ServerContextBase& ctx) {
  if (std::optional<ConnectionInfo> c = ConnectionOf(ctx)) return absl::StrCat("conn:", c->id);
  return absl::StrCat("peer:", ctx.peer());
}

std::optional<std::string> HeaderKey(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(kClientIdHeader);
  if (it == md.end()) return std::nullopt;
  absl::string_view id(it->second.data(), it->second.size());
  if (!ValidId(id)) return std::nullopt;
  return absl::StrCat("id:", id);
}

std::optional<std::string> TlsKey(const grpc::ServerContextBase& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return std::nullopt;
  std::vector<grpc::string_ref> names = auth->GetPeerIdentity();
  if (names.empty()) return std::nullopt;
  absl::string_view id(names[0].data(), names[0].size());
  if (!ValidId(id)) return std::nullopt;
  return absl::StrCat("tls:", id);
}

}  // namespace

absl::string_view ClientIdentityName(ClientIdentity identity) {
  return kNames[static_cast<size_t>(identity)];
}

std::optional<ClientIdentity> ParseClientIdentity(absl::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (name == kNames[i]) return static_cast<ClientIdentity>(i);
  }
  return std::nullopt;
}

std::string ClientKey(const grpc::ServerContextBase& ctx, ClientIdentity identity) {
  std::optional<std::string> key;
  switch (identity) {
    case ClientIdentity::kConnection: break;
    case ClientIdentity::kUid:
      if (std::optional<PeerCredentials> c = PeerCredentialsOf(ctx)) {
        key = absl::StrCat("uid:", c->uid);
      }
      break;
    case ClientIdentity::kHeader: key = HeaderKey(ctx); break;
    case ClientIdentity::kTls: key = TlsKey(ctx); break;
  }
  return key ? *std::move(key) : ConnectionKey(ctx);
}

}  // namespace maskd

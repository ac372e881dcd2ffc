#include "service/client_shares.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace maskd {

struct ClientShares::State {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, uint64_t> held ABSL_GUARDED_BY(mu);  // entries > 0
};

ClientShares::ClientShares(std::string what, std::string flag, uint64_t per_client)
    : what_(std::move(what)),
      flag_(std::move(flag)),
      per_client_(per_client),
      state_(std::make_shared<State>()) {}

ClientShares::Charge& ClientShares::Charge::operator=(Charge&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    client_ = std::move(other.client_);
  }
  return *this;
}

void ClientShares::Charge::Release() {
  if (state_ == nullptr) return;
  {
    absl::MutexLock lock(&state_->mu);
    auto it = state_->held.find(client_);
    if (it != state_->held.end() && --it->second == 0) state_->held.erase(it);
  }
  state_.reset();
}

absl::Status ClientShares::Refusal(absl::string_view client, uint64_t held) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "client ", client, " holds ", held, " ", what_, ", its whole share (", flag_, "=",
      per_client_, "; clients are told apart by --client-identity)"));
}

absl::StatusOr<ClientShares::Charge> ClientShares::Take(absl::string_view client) {
  {
    absl::MutexLock lock(&state_->mu);
    uint64_t& mine = state_->held[client];
    if (per_client_ != 0 && mine >= per_client_) return Refusal(client, mine);
    ++mine;
  }
  return Charge(state_, std::string(client));
}

absl::Status ClientShares::Check(absl::string_view client) const {
  const uint64_t mine = held(client);
  if (per_client_ != 0 && mine >= per_client_) return Refusal(client, mine);
  return absl::OkStatus();
}

uint64_t ClientShares::held(absl::string_view client) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->held.find(client);
  return it == state_->held.end() ? 0 : it->second;
}

}  // namespace maskd

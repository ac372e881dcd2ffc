// ClientShares: one resource's share per client. Each client (a key from
// ClientKey, client_identity.h; any string here: this header knows nothing of
// gRPC) may hold at most `per_client` units of the resource at once, so that
// one client, hostile or leaking, exhausts only its own share and never the
// global cap the others need.
//
// A unit is held by a Charge (move-only): taken with Take, given back when
// the Charge is destroyed, wherever that happens (a session closed, expired
// or dropped with its table; a stream's reactor done). A Charge may outlive
// its ClientShares. Refusals are RESOURCE_EXHAUSTED and name the share, the
// flag that sets it and the client's key.
//
// Thread-safe: one mutex around a hash map of the clients holding any unit
// (an entry per client with a unit held, none otherwise). Taken on create and
// release of a unit, never on the Step path.
#ifndef MASKD_SERVICE_CLIENT_SHARES_H_
#define MASKD_SERVICE_CLIENT_SHARES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace maskd {

class ClientShares {
 private:
  struct State;

 public:
  // `what`: the units, plural, for messages ("sessions"); `flag`: the flag
  // that sets `per_client` ("--max-sessions-per-client"). per_client 0: no
  // cap (units are still counted).
  ClientShares(std::string what, std::string flag, uint64_t per_client);

  // One unit held by one client; empty (holds nothing) when default-made or
  // moved from.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& other) noexcept = default;
    Charge& operator=(Charge&& other) noexcept;
    ~Charge() { Release(); }
    bool held() const { return state_ != nullptr; }
    // The client charged (as given to Take); empty when nothing is held.
    const std::string& client() const { return client_; }

   private:
    friend class ClientShares;
    Charge(std::shared_ptr<State> state, std::string client)
        : state_(std::move(state)), client_(std::move(client)) {}
    void Release();
    std::shared_ptr<State> state_;
    std::string client_;
  };

  // A unit for `client`, or RESOURCE_EXHAUSTED when it holds its whole share.
  absl::StatusOr<Charge> Take(absl::string_view client);
  // What Take would answer now, taking nothing: for refusing before
  // expensive work (which then Takes, as the share may have filled since).
  absl::Status Check(absl::string_view client) const;
  // Units `client` holds now.
  uint64_t held(absl::string_view client) const;
  uint64_t per_client() const { return per_client_; }

 private:
  absl::Status Refusal(absl::string_view client, uint64_t held) const;

  const std::string what_, flag_;
  const uint64_t per_client_;
  const std::shared_ptr<State> state_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_CLIENT_SHARES_H_

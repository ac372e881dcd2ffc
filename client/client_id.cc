#include "client/client_id.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace maskd {
namespace {

constexpr size_t kMaxClientIdBytes = 128;
constexpr absl::string_view kClientIdPunctuation = "._:@/+-";
constexpr char kClientIdRule[] = "1 to 128 bytes of [A-Za-z0-9._:@/+-]";

// One per call. `id_` is the factory's: the channel owns the factory, and a
// call's ClientContext holds the channel, so no copy of the id per call.
class ClientIdInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ClientIdInterceptor(const std::string& id) : id_(id) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kClientIdMetadataKey, id_);
    }
    methods->Proceed();
  }

 private:
  const std::string& id_;
};

class ClientIdFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClientIdFactory(std::string id) : id_(std::move(id)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new ClientIdInterceptor(id_);
  }

 private:
  const std::string id_;
};

}  // namespace

absl::Status ValidateClientId(absl::string_view id) {
  if (id.empty() || id.size() > kMaxClientIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("client_id has ", id.size(),
                                                   " bytes; a client id is ", kClientIdRule));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (!absl::ascii_isalnum(c) && kClientIdPunctuation.find(id[i]) == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("client_id byte ", i, " (0x",
                                                     absl::Hex(c, absl::kZeroPad2),
                                                     ") is not allowed; a client id is ",
                                                     kClientIdRule));
    }
  }
  return absl::OkStatus();
}

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> ClientIdInterceptorFactory(
    std::string id) {
  return std::make_unique<ClientIdFactory>(std::move(id));
}

}  // namespace maskd

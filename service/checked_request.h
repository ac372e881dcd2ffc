// Checked<T>: a request message whose parse failure reaches the handler.
//
// gRPC 1.51's callback API drops a request that fails to parse (bad protobuf
// wire data, or a proto3 `string` field that is not UTF-8) before any
// handler runs, and answers UNIMPLEMENTED with an empty message
// (CallbackUnaryHandler::RunHandler in grpcpp/impl/codegen/
// server_callback_handlers.h); on a stream, the read just fails, which looks
// like a half-close. maskd registers its handlers over Checked<Request>
// instead: its SerializationTraits always "succeed" and record in `ok`
// whether the message parsed, so the handler answers INVALID_ARGUMENT with a
// message naming the request type. Parsing is the stock protobuf parse; the
// only cost added is the `ok` flag.
//
// NewCheckedUnaryHandler builds such a handler; a service installs it with
// MarkMethodCallback(index, ...) after CheckMethodShape confirms that
// method `index` (the generated code numbers methods in proto order) is the
// one meant.
#ifndef MASKD_SERVICE_CHECKED_REQUEST_H_
#define MASKD_SERVICE_CHECKED_REQUEST_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/support/byte_buffer.h"

namespace maskd {

template <typename T>
struct Checked {
  T msg;
  bool ok = true;  // false: the wire bytes did not parse as a T
  void Clear() {
    msg.Clear();
    ok = true;
  }
  // INVALID_ARGUMENT naming the request type (call when !ok).
  absl::Status Error() const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed ", T::descriptor()->full_name(),
                     ": not valid protobuf wire data, or a string field that is not UTF-8"));
  }
};

// Aborts at start-up unless method `index` of `service` is `name` taking
// `input`: a mismatch means the generated code and maskd disagree.
void CheckMethodShape(const google::protobuf::ServiceDescriptor* service, int index,
                      const char* name, const google::protobuf::Descriptor* input);

// A unary handler over Checked<Req>: a request that parsed goes to
// `handle(ctx, const Req*, Resp*)`, one that did not to
// `refuse(ctx, INVALID_ARGUMENT status)`; both return the call's reactor.
template <typename Req, typename Resp, typename Handle, typename Refuse>
grpc::internal::CallbackUnaryHandler<Checked<Req>, Resp>* NewCheckedUnaryHandler(Handle handle,
                                                                                Refuse refuse) {
  return new grpc::internal::CallbackUnaryHandler<Checked<Req>, Resp>(
      [handle, refuse](grpc::CallbackServerContext* ctx, const Checked<Req>* req,
                       Resp* resp) -> grpc::ServerUnaryReactor* {
        if (!req->ok) return refuse(ctx, req->Error());
        return handle(ctx, &req->msg, resp);
      });
}

}  // namespace maskd

namespace grpc {

template <typename T>
class SerializationTraits<maskd::Checked<T>, void> {
 public:
  static Status Serialize(const maskd::Checked<T>& m, ByteBuffer* bb, bool* own_buffer) {
    return SerializationTraits<T>::Serialize(m.msg, bb, own_buffer);
  }
  static Status Deserialize(ByteBuffer* buffer, maskd::Checked<T>* m) {
    m->ok = SerializationTraits<T>::Deserialize(buffer, &m->msg).ok();
    if (!m->ok) m->msg.Clear();
    return Status::OK;
  }
};

}  // namespace grpc

#endif  // MASKD_SERVICE_CHECKED_REQUEST_H_

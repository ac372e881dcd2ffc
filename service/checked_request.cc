#include "service/checked_request.h"

#include <cstdio>
#include <cstdlib>

namespace maskd {

void CheckMethodShape(const google::protobuf::ServiceDescriptor* service, int index,
                      const char* name, const google::protobuf::Descriptor* input) {
  const google::protobuf::MethodDescriptor* m =
      service == nullptr || index >= service->method_count() ? nullptr : service->method(index);
  if (m == nullptr || m->name() != name || m->input_type() != input) {
    std::fprintf(stderr, "maskd: method %d of %s is not %s\n", index,
                 service == nullptr ? "?" : service->full_name().c_str(), name);
    std::abort();
  }
}

}  // namespace maskd

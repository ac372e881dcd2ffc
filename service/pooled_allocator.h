// PooledAllocator: gRPC callback-API request/response pairs recycled through a
// per-thread free list, so a steady stream of calls reuses the messages'
// buffers (a Step reply's mask bytes) instead of allocating them per call.
// No lock: a holder released on another thread joins that thread's list. At
// most kMaxPerThread holders are kept per thread; a holder whose response
// retains more than kMaxKeptBytes (as `retained_bytes` measures it) is freed.
#ifndef MASKD_SERVICE_POOLED_ALLOCATOR_H_
#define MASKD_SERVICE_POOLED_ALLOCATOR_H_

#include <cstddef>
#include <vector>

#include <grpcpp/support/message_allocator.h>

namespace maskd {

template <typename Request, typename Response>
class PooledAllocator : public grpc::MessageAllocator<Request, Response> {
 public:
  static constexpr size_t kMaxPerThread = 16;
  static constexpr size_t kMaxKeptBytes = 8u << 20;
  using RetainedBytesFn = size_t (*)(const Response&);

  explicit PooledAllocator(RetainedBytesFn retained_bytes = nullptr) : retained_bytes_(retained_bytes) {}

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    FreeList& list = List();
    if (list.items.empty()) return new Holder(retained_bytes_);
    Holder* h = list.items.back();
    list.items.pop_back();
    return h;
  }

 private:
  class Holder : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(RetainedBytesFn retained_bytes) : retained_bytes_(retained_bytes) {
      this->set_request(&req_);
      this->set_response(&resp_);
    }
    void Release() override {
      FreeList& list = List();
      if (list.items.size() >= kMaxPerThread ||
          (retained_bytes_ != nullptr && retained_bytes_(resp_) > kMaxKeptBytes)) {
        delete this;
        return;
      }
      req_.Clear();
      resp_.Clear();
      list.items.push_back(this);
    }

   private:
    const RetainedBytesFn retained_bytes_;
    Request req_;
    Response resp_;
  };

  struct FreeList {
    std::vector<Holder*> items;
    ~FreeList() {
      for (Holder* h : items) delete h;
    }
  };
  static FreeList& List() {
    thread_local FreeList list;
    return list;
  }

  const RetainedBytesFn retained_bytes_;
};

}  // namespace maskd

#endif  // MASKD_SERVICE_POOLED_ALLOCATOR_H_

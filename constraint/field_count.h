// FieldCount<T>(): the number of fields of aggregate T, at compile time, so
// that a hand-written list of T's fields (a cache key, an equality) can
// static_assert that it names every one: adding a field then fails to build
// until the list is updated.
//
// T must be an aggregate without base classes or array members (each field
// is initialised from one value). A field that is itself an aggregate counts
// once.
#ifndef MASKD_CONSTRAINT_FIELD_COUNT_H_
#define MASKD_CONSTRAINT_FIELD_COUNT_H_

#include <cstddef>
#include <type_traits>

namespace maskd {
namespace field_count_internal {

// Converts to any field type (never evaluated).
struct AnyField {
  template <typename T>
  operator T&() const;  // NOLINT(google-explicit-constructor)
};

}  // namespace field_count_internal

template <typename T, typename... Fields>
constexpr size_t FieldCount() {
  static_assert(std::is_aggregate_v<T>, "FieldCount needs an aggregate");
  using field_count_internal::AnyField;
  if constexpr (requires { T{Fields{}..., AnyField{}}; }) {
    return FieldCount<T, Fields..., AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

}  // namespace maskd

#endif  // MASKD_CONSTRAINT_FIELD_COUNT_H_

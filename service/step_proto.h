// step_proto.h: the wire form of a step entry and its result (maskd.v1
// StepEntry and StepResult, shared by Maskd.Step, Maskd.StepStream and
// SharedMemory.StepInRegion) to and from StepBatch's plain structs.
#ifndef MASKD_SERVICE_STEP_PROTO_H_
#define MASKD_SERVICE_STEP_PROTO_H_

#include <cstdint>

#include "maskd/v1/maskd.pb.h"
#include "service/quote.h"
#include "service/step_batch.h"

namespace maskd {

// `e`'s fields; the tokens are a view into `e`, valid while `e` is.
inline StepEntryInput StepEntryFromProto(const v1::StepEntry& e) {
  StepEntryInput in;
  in.session_id = e.session_id();
  in.rollback = e.rollback();
  in.tokens = absl::MakeConstSpan(e.tokens().data(), e.tokens_size());
  in.max_tokens_left = e.max_tokens_left();
  return in;
}

// Writes `r` into `out`, a cleared (or new) StepResult: the outcome fields,
// and on error the status with its message bounded (BoundMessage).
inline void StepResultToProto(const StepEntryResult& r, v1::StepResult* out) {
  out->set_num_tokens(r.num_tokens);
  out->set_accepting(r.accepting);
  out->set_finished(r.finished);
  out->set_min_bytes_to_finish(r.min_bytes_to_finish);
  out->set_forced(r.forced);
  if (r.status.ok()) return;
  v1::Status* st = out->mutable_status();
  st->set_code(static_cast<int32_t>(r.status.code()));
  st->set_message(BoundMessage(r.status.message()));
}

// Whether some entry of `entries` names a grammar session
// (SessionTable::IsGrammarId: a bit of the id, no lookup), whose steps may
// parse for long: such a batch runs on the step WorkPool, off gRPC's threads;
// regex sessions step in a table walk per token.
template <typename Entries>
bool StepsGrammar(const Entries& entries) {
  for (const v1::StepEntry& e : entries) {
    if (SessionTable::IsGrammarId(e.session_id())) return true;
  }
  return false;
}

}  // namespace maskd

#endif  // MASKD_SERVICE_STEP_PROTO_H_

#include "tokenizer/loop_shape.h"

#include <algorithm>
#include <utility>

namespace maskd {

namespace {

using State = Dfa::State;
using ByteSet = LoopMasks::ByteSet;

constexpr auto Has = LoopMasks::Has;
constexpr auto Add = LoopMasks::Add;

// One FindShape search. It works per DFA byte class (every byte of a class
// has the same transition from every state), in phases: explore the live
// states breadth-first from s, index their predecessors, find the loop C,
// its exits, number C canonically, and merge the DFA classes that C cannot
// tell apart into the loop's own classes.
class ShapeSearch {
 public:
  ShapeSearch(const Dfa& dfa, State s) : dfa_(dfa), s_(s), nc_(dfa.num_classes()) {}

  bool Run(const ByteSet* cut_bytes, LoopShape* out) {
    ReadByteClasses(cut_bytes);
    Explore();
    IndexPredecessors();
    if (!FindLoop() || !FindExits(out)) return false;
    NumberCanonically(&out->canon);
    MergeLoopClasses(out);
    return true;
  }

 private:
  // succ_ entries: the successor is dead, or cut or past the search.
  static constexpr int32_t kNone = -1, kOutside = -2;

  void ReadByteClasses(const ByteSet* cut_bytes);
  void Explore();
  void IndexPredecessors();
  bool CloseOnCycle(uint32_t anchor);
  bool FindLoop();
  bool FindExits(LoopShape* out);
  void NumberCanonically(std::vector<State>* canon);
  void MergeLoopClasses(LoopShape* out);
  // The found index of DFA state t, or -1 when the search did not find it.
  int32_t FoundIndex(State t) const {
    return (*stamp_)[t].first == epoch_ ? static_cast<int32_t>((*stamp_)[t].second) : -1;
  }

  const Dfa& dfa_;
  const State s_;
  const uint32_t nc_;  // DFA byte classes
  // Per DFA class: a representative byte (its first), its number of bytes,
  // and whether it is cut.
  uint8_t rep_[256];
  uint32_t class_size_[256] = {};
  std::vector<uint8_t> cut_class_;
  // Found indices live in a thread-local stamp array over DFA states: state
  // t has index stamp[t].second when stamp[t].first is this search's epoch.
  std::vector<std::pair<uint32_t, uint32_t>>* stamp_ = nullptr;
  uint32_t epoch_ = 0;
  std::vector<State> found_;  // live states found, breadth-first from s (index 0)
  // succ_[i * nc_ + c]: the found index of found_[i]'s successor by class c,
  // else kNone or kOutside.
  std::vector<int32_t> succ_;
  // Predecessors among found states (CSR): those of j are
  // preds_[pred_begin_[j] .. pred_begin_[j + 1]).
  std::vector<uint32_t> pred_begin_, preds_;
  std::vector<uint8_t> in_loop_;     // per found state: in C
  std::vector<uint32_t> work_;       // CloseOnCycle's stack
  std::vector<uint8_t> exit_class_;  // per DFA class: some state of C leaves C by it
  std::vector<uint32_t> class_order_;  // DFA classes by first byte
  // Canonical rows x DFA classes: 0 dead or exit, else the next row + 1.
  std::vector<uint32_t> by_class_;
};

void ShapeSearch::ReadByteClasses(const ByteSet* cut_bytes) {
  cut_class_.assign(nc_, 0);
  for (int b = 255; b >= 0; --b) {
    uint8_t c = dfa_.byte_class(static_cast<uint8_t>(b));
    rep_[c] = static_cast<uint8_t>(b);
    ++class_size_[c];
    if (cut_bytes != nullptr && Has(*cut_bytes, static_cast<uint8_t>(b))) cut_class_[c] = 1;
  }
}

// Live states breadth-first from s (at most kMaxLoopStates), not following
// cut classes; fills found_ and succ_.
void ShapeSearch::Explore() {
  thread_local std::vector<std::pair<uint32_t, uint32_t>> stamp;  // (epoch, index)
  thread_local uint32_t epoch = 0;
  if (stamp.size() < dfa_.num_states()) stamp.assign(dfa_.num_states(), {0, 0});
  if (++epoch == 0) {
    std::fill(stamp.begin(), stamp.end(), std::make_pair(0u, 0u));
    epoch = 1;
  }
  stamp_ = &stamp;
  epoch_ = epoch;
  found_ = {s_};
  stamp[s_] = {epoch, 0};
  for (size_t i = 0; i < found_.size(); ++i) {
    for (uint32_t c = 0; c < nc_; ++c) {
      State t = dfa_.Next(found_[i], rep_[c]);
      int32_t j = kNone;
      // A lazy DFA numbers states as this search reaches them.
      if (t >= stamp.size()) stamp.resize(std::max<size_t>(t + 1, 2 * stamp.size()), {0, 0});
      if (t != Dfa::kDead) {
        if (cut_class_[c]) {
          j = kOutside;
        } else if (stamp[t].first == epoch) {
          j = static_cast<int32_t>(stamp[t].second);
        } else if (found_.size() < LoopMasks::kMaxLoopStates) {
          j = static_cast<int32_t>(found_.size());
          stamp[t] = {epoch, static_cast<uint32_t>(j)};
          found_.push_back(t);
        } else {
          j = kOutside;
        }
      }
      succ_.push_back(j);
    }
  }
}

void ShapeSearch::IndexPredecessors() {
  const uint32_t nf = static_cast<uint32_t>(found_.size());
  pred_begin_.assign(nf + 1, 0);
  for (int32_t j : succ_) {
    if (j >= 0) ++pred_begin_[j + 1];
  }
  for (uint32_t i = 0; i < nf; ++i) pred_begin_[i + 1] += pred_begin_[i];
  preds_.resize(pred_begin_[nf]);
  std::vector<uint32_t> fill(pred_begin_.begin(), pred_begin_.end() - 1);
  for (size_t e = 0; e < succ_.size(); ++e) {
    if (succ_[e] >= 0) preds_[fill[succ_[e]]++] = static_cast<uint32_t>(e / nc_);
  }
}

// Sets in_loop_ to the found states that reach `anchor` through found
// states, plus the anchor; returns whether the anchor is on a cycle.
bool ShapeSearch::CloseOnCycle(uint32_t anchor) {
  std::fill(in_loop_.begin(), in_loop_.end(), 0);
  bool on_cycle = false;
  work_.assign(1, anchor);
  while (!work_.empty()) {
    uint32_t j = work_.back();
    work_.pop_back();
    for (uint32_t k = pred_begin_[j]; k < pred_begin_[j + 1]; ++k) {
      uint32_t i = preds_[k];
      on_cycle |= i == anchor;
      if (!in_loop_[i]) {
        in_loop_[i] = 1;
        work_.push_back(i);
      }
    }
  }
  in_loop_[anchor] = 1;
  return on_cycle;
}

// C: the found states that reach the loop's anchor through found states,
// plus s. The anchor is s when s is on a cycle; otherwise the successor s
// reaches by the most bytes (s may be the state just before a loop, such as
// a string's opening quote before its content). False when neither is on a
// cycle among the found states.
bool ShapeSearch::FindLoop() {
  in_loop_.assign(found_.size(), 0);
  if (CloseOnCycle(0)) return true;
  uint32_t widest = 0;
  const State t = dfa_.WidestSuccessor(s_, &widest);
  if (t == Dfa::kDead) return false;
  const int32_t anchor = FoundIndex(t);
  if (anchor <= 0 || !CloseOnCycle(static_cast<uint32_t>(anchor))) return false;
  in_loop_[0] = 1;
  return true;
}

// Exit classes: those by which some state of C leaves C alive (out->x is
// their bytes). False when fewer than kMinStayBytes bytes of the other
// classes keep s in C.
bool ShapeSearch::FindExits(LoopShape* out) {
  exit_class_.assign(nc_, 0);
  for (uint32_t i = 0; i < found_.size(); ++i) {
    if (!in_loop_[i]) continue;
    for (uint32_t c = 0; c < nc_; ++c) {
      int32_t j = succ_[i * nc_ + c];
      if (j == kOutside || (j >= 0 && !in_loop_[j])) exit_class_[c] = 1;
    }
  }
  uint32_t stay = 0;
  for (uint32_t c = 0; c < nc_; ++c) {
    if (!exit_class_[c] && succ_[c] >= 0) stay += class_size_[c];
  }
  if (stay < LoopMasks::kMinStayBytes) return false;
  out->x = {};
  for (int b = 0; b < 256; ++b) {
    if (exit_class_[dfa_.byte_class(static_cast<uint8_t>(b))]) Add(out->x, static_cast<uint8_t>(b));
  }
  return true;
}

// Canonical numbering: breadth-first from s over the non-exit classes in the
// order of their first byte, so it does not depend on how this DFA numbers
// its classes. Fills *canon (canonical state -> DFA state) and by_class_.
void ShapeSearch::NumberCanonically(std::vector<State>* canon) {
  {
    std::vector<uint8_t> listed(nc_, 0);
    for (int b = 0; b < 256; ++b) {
      uint8_t c = dfa_.byte_class(static_cast<uint8_t>(b));
      if (!listed[c]) {
        listed[c] = 1;
        class_order_.push_back(c);
      }
    }
  }
  canon->assign(1, s_);
  std::vector<uint32_t> canon_found = {0};  // canonical -> found index
  std::vector<int32_t> canon_of(found_.size(), -1);
  canon_of[0] = 0;
  for (size_t r = 0; r < canon->size(); ++r) {
    by_class_.resize(by_class_.size() + nc_, 0);
    uint32_t* row = by_class_.data() + r * nc_;
    const int32_t* from = succ_.data() + static_cast<size_t>(canon_found[r]) * nc_;
    for (uint32_t c : class_order_) {
      const int32_t j = from[c];
      if (exit_class_[c] || j < 0) continue;  // exit or dead (j is in C otherwise)
      if (canon_of[j] < 0) {
        canon_of[j] = static_cast<int32_t>(canon->size());
        canon->push_back(found_[j]);
        canon_found.push_back(static_cast<uint32_t>(j));
      }
      row[c] = static_cast<uint32_t>(canon_of[j]) + 1;
    }
  }
}

// The loop's own byte classes: DFA classes with equal columns merge; loop
// class 0 holds the bytes dead (or exits) from every row. Fills out's
// byte_map and table from by_class_.
void ShapeSearch::MergeLoopClasses(LoopShape* out) {
  const uint32_t rows = static_cast<uint32_t>(out->canon.size());
  std::vector<int32_t> local_of(nc_, -1);
  std::vector<uint32_t> local_rep = {nc_};  // a DFA class per loop class (0: none)
  for (uint32_t c : class_order_) {
    bool all_dead = true;
    for (uint32_t r = 0; r < rows && all_dead; ++r) all_dead = by_class_[r * nc_ + c] == 0;
    if (all_dead) {
      local_of[c] = 0;
      continue;
    }
    for (uint32_t l = 1; l < local_rep.size() && local_of[c] < 0; ++l) {
      bool same = true;
      for (uint32_t r = 0; r < rows && same; ++r) {
        same = by_class_[r * nc_ + c] == by_class_[r * nc_ + local_rep[l]];
      }
      if (same) local_of[c] = static_cast<int32_t>(l);
    }
    if (local_of[c] < 0) {
      local_of[c] = static_cast<int32_t>(local_rep.size());
      local_rep.push_back(c);
    }
  }
  const uint32_t nl = static_cast<uint32_t>(local_rep.size());
  out->byte_map.resize(256);
  for (int b = 0; b < 256; ++b) {
    out->byte_map[b] = static_cast<uint8_t>(local_of[dfa_.byte_class(static_cast<uint8_t>(b))]);
  }
  out->table.assign(static_cast<size_t>(rows + 1) * nl, 0);
  for (uint32_t r = 0; r < rows; ++r) {
    for (uint32_t l = 1; l < nl; ++l) {
      out->table[(r + 1) * nl + l] = by_class_[r * nc_ + local_rep[l]];
    }
  }
}

}  // namespace

bool FindShape(const Dfa& dfa, State s, const ByteSet* cut_bytes, LoopShape* out) {
  return ShapeSearch(dfa, s).Run(cut_bytes, out);
}

}  // namespace maskd

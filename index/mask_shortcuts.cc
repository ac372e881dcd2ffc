// The tests that tell which shortcut builds a state's mask exactly
// (token_index.h lists them): a self-loop (TokenIndex::SelfLoopWorthIt), a
// chain of positions in a bounded string (ChainWorthIt), a reference state
// (ReferenceFor). Each reads the DFA around the state and the vocabulary's
// byte index counts; none walks a token.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "index/token_index.h"
#include "tokenizer/loop_masks.h"
#include "tokenizer/token_trie.h"
#include "tokenizer/utf8_closed.h"

namespace maskd {

TokenIndex::State TokenIndex::ReferenceFor(State s) const {
  // The successor most bytes lead to: the state a key-exclusion or opening
  // quote state hands over to (a string's free content).
  const Dfa& dfa = *dfa_;
  const TokenTrie& trie = context_->trie();
  uint32_t best = 0;
  const State ref = dfa.WidestSuccessor(s, &best);
  if (ref == Dfa::kDead || best < LoopMasks::kMinStayBytes) return Dfa::kDead;
  // Worth it when the subtrees s and ref agree on hold most tokens.
  const uint32_t* token_begin = trie.token_begin();
  size_t agree = 0;
  for (int b = 0; b < 256; ++b) {
    const uint32_t node = trie.root_child(static_cast<uint8_t>(b));
    if (node != 0 && dfa.Next(s, static_cast<uint8_t>(b)) == dfa.Next(ref, static_cast<uint8_t>(b))) {
      agree += token_begin[trie.nodes()[node].next] - token_begin[node];
    }
  }
  return agree * kMinReferenceShare[1] >= trie.num_tokens() * kMinReferenceShare[0] ? ref
                                                                                     : Dfa::kDead;
}

bool TokenIndex::SelfLoopWorthIt(State s, bool* utf8) const {
  // Worth it when at least kMinStayBytes bytes keep s in s and few tokens
  // (at most 1/kMaxExitShare, counted once per byte) hold a byte that leads
  // elsewhere alive: those are walked one by one, the rest is bitmask work.
  const Dfa& dfa = *dfa_;
  const LoopMasks& index = context_->loop_masks();
  uint32_t stay = 0;
  size_t walked = 0;
  for (int b = 0; b < 0x80; ++b) {
    const State t = dfa.Next(s, static_cast<uint8_t>(b));
    if (t == s) {
      ++stay;
    } else if (t != Dfa::kDead) {
      walked += index.NumTokensWith(static_cast<uint8_t>(b));
    }
  }
  if (walked * LoopMasks::kMaxExitShare > context_->trie().num_tokens()) return false;
  thread_local std::vector<std::pair<uint8_t, Dfa::State>> pairs;
  *utf8 = Utf8Closed(dfa, s, s, &pairs);
  if (*utf8) {
    stay += 0x80;
  } else {
    for (int b = 0x80; b < 256; ++b) {
      const State t = dfa.Next(s, static_cast<uint8_t>(b));
      if (t == s) {
        ++stay;
      } else if (t != Dfa::kDead) {
        walked += index.NumTokensWith(static_cast<uint8_t>(b));
      }
    }
  }
  return stay >= LoopMasks::kMinStayBytes &&
         walked * LoopMasks::kMaxExitShare <= context_->trie().num_tokens();
}

TokenIndex::State TokenIndex::ChainWorthIt(State s, bool* utf8, std::vector<State>* chain) const {
  // s_0 = s, s_1 = the successor most bytes lead to; S: the ASCII bytes
  // leading s to s_1. Each s_i (i < kChainDepth) must lead every byte of S
  // (and, with `utf8`, every well-formed UTF-8 character) to one s_(i+1),
  // kill every other ASCII byte s kills, and (without `utf8`) every
  // non-ASCII byte. Then a token of at most kChainDepth bytes within S is
  // allowed (it ends in some s_i, or inside a character after one), and one
  // holding another byte is decided at its first such byte: rejected there
  // unless s lets that byte through.
  const Dfa& dfa = *dfa_;
  const LoopMasks& index = context_->loop_masks();
  uint32_t widest = 0;
  const State next = dfa.WidestSuccessor(s, &widest);
  if (next == Dfa::kDead || widest < LoopMasks::kMinStayBytes) return Dfa::kDead;
  uint8_t kind[0x80];  // 0 dead, 1 in S, 2 live outside S
  uint32_t stay = 0;
  size_t walked = 0;
  for (int b = 0; b < 0x80; ++b) {
    const State t = dfa.Next(s, static_cast<uint8_t>(b));
    kind[b] = t == Dfa::kDead ? 0 : t == next ? 1 : 2;
    stay += kind[b] == 1;
    if (kind[b] == 2) walked += index.NumTokensWith(static_cast<uint8_t>(b));
  }
  walked += index.LongTokens().size();
  if (stay < LoopMasks::kMinStayBytes ||
      walked * LoopMasks::kMaxExitShare > context_->trie().num_tokens()) {
    return Dfa::kDead;
  }
  thread_local std::vector<std::pair<uint8_t, Dfa::State>> pairs;
  *utf8 = Utf8Closed(dfa, s, next, &pairs);
  auto all_high_dead = [&](State q) {
    for (int b = 0x80; b < 256; ++b) {
      if (dfa.Next(q, static_cast<uint8_t>(b)) != Dfa::kDead) return false;
    }
    return true;
  };
  if (!*utf8 && !all_high_dead(s)) return Dfa::kDead;
  State cur = next;
  chain->assign({s, next});
  for (uint32_t i = 1; i < kChainDepth; ++i) {
    State nxt = Dfa::kDead;
    for (int b = 0; b < 0x80; ++b) {
      const State t = dfa.Next(cur, static_cast<uint8_t>(b));
      if (kind[b] == 1) {
        if (t == Dfa::kDead || (nxt != Dfa::kDead && t != nxt)) return Dfa::kDead;
        nxt = t;
      } else if (kind[b] == 0 && t != Dfa::kDead) {
        return Dfa::kDead;  // a byte s kills must stay dead
      }
    }
    if (*utf8 ? !Utf8Closed(dfa, cur, nxt, &pairs) : !all_high_dead(cur)) {
      return Dfa::kDead;
    }
    cur = nxt;
    chain->push_back(cur);
  }
  return next;
}

}  // namespace maskd

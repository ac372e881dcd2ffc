#include "tests/grammar/grammar_test_util.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string_view>

#include "grammar/bnf_parser.h"
#include "grammar/lark_parser.h"
#include "gtest/gtest.h"

namespace maskd::testing {

std::string ReadGrammar(const std::string& name) {
  std::ifstream in(std::string(MASKD_SOURCE_DIR) + "/tests/data/grammars/" + name,
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<grammar::Grammar> ParseGrammarFile(const std::string& name) {
  const std::string text = ReadGrammar(name);
  if (text.empty()) return absl::NotFoundError("tests/data/grammars/" + name + " is missing or empty");
  const bool lark = name.size() > 5 && name.compare(name.size() - 5, 5, ".lark") == 0;
  return lark ? grammar::ParseLark(text) : grammar::ParseGbnf(text);
}

std::vector<uint32_t> Allowed(const std::vector<uint32_t>& words) {
  std::vector<uint32_t> out;
  for (uint32_t w = 0; w < words.size(); ++w) {
    for (uint32_t b = 0; b < 32; ++b) {
      if ((words[w] >> b) & 1) out.push_back(w * 32 + b);
    }
  }
  return out;
}

std::vector<uint32_t> TextTokensByBytes(const Vocabulary& vocab) {
  std::vector<uint32_t> order;
  for (uint32_t t = 0; t < vocab.size(); ++t) {
    if (vocab.has_token(t) && !vocab.is_special(t) && !vocab.bytes(t).empty()) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return vocab.bytes(a) < vocab.bytes(b); });
  return order;
}

bool TakesBytes(grammar::EarleyParser& parser, std::string_view bytes) {
  const size_t base = parser.num_sets();
  bool live = !bytes.empty();
  for (char c : bytes) {
    auto ok = parser.Push(static_cast<uint8_t>(c));
    EXPECT_TRUE(ok.ok()) << ok.status();
    if (!ok.ok() || !*ok) {
      live = false;
      break;
    }
  }
  parser.PopTo(base);
  return live;
}

std::vector<uint32_t> BruteForceMask(const grammar::GrammarIndex& index,
                                     const grammar::EarleyParser& parser,
                                     const std::vector<uint32_t>& order) {
  const Vocabulary& vocab = index.vocab();
  std::vector<uint32_t> words(index.num_words(), 0);
  if (parser.IsAccepting()) {
    for (uint32_t t : vocab.eos_ids()) words[t >> 5] |= 1u << (t & 31);
  }
  grammar::EarleyParser p = parser;
  const size_t base = p.num_sets();
  // `path`: the bytes pushed on p past `base` (p.num_sets() == base +
  // path.size()); when `refused`, path + refused_byte is not a viable
  // continuation.
  std::string path;
  bool refused = false;
  uint8_t refused_byte = 0;
  for (uint32_t t : order) {
    const std::string_view bytes = vocab.bytes(t);
    size_t common = 0;
    while (common < path.size() && common < bytes.size() && path[common] == bytes[common]) ++common;
    if (common < path.size()) {
      p.PopTo(base + common);
      path.resize(common);
      refused = false;
    }
    if (refused && bytes.size() > common && static_cast<uint8_t>(bytes[common]) == refused_byte) {
      continue;
    }
    bool live = true;
    for (size_t i = common; i < bytes.size(); ++i) {
      auto ok = p.Push(static_cast<uint8_t>(bytes[i]));
      EXPECT_TRUE(ok.ok()) << ok.status();
      if (!ok.ok() || !*ok) {
        live = false;
        refused = ok.ok();
        refused_byte = static_cast<uint8_t>(bytes[i]);
        break;
      }
      path.push_back(bytes[i]);
      refused = false;
    }
    if (live) words[t >> 5] |= 1u << (t & 31);
  }
  return words;
}

std::vector<uint32_t> BruteForceMask(const grammar::GrammarIndex& index,
                                     const grammar::EarleyParser& parser) {
  return BruteForceMask(index, parser, TextTokensByBytes(index.vocab()));
}

}  // namespace maskd::testing

// Shared by the tests of grammars through the real maskd binary
// (tests/service/grammar_service_*_test.cc): a grammar CompileRequest, a cheap
// arithmetic GBNF grammar, and the self-concatenating Lark grammar whose masks
// cost minutes of parsing.
#ifndef MASKD_TESTS_SERVICE_GRAMMAR_SERVICE_TEST_UTIL_H_
#define MASKD_TESTS_SERVICE_GRAMMAR_SERVICE_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "client/client.h"

namespace maskd::grammar_service_test {

// Mask tokens ("a") after which a mask of kSelfConcatLark takes minutes.
constexpr int kAbandonedTokens = 200;

constexpr char kArithmeticGbnf[] = R"g(root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
)g";

// Issue #24 (1): an ambiguous Lark grammar of one self-concatenating rule
// over any byte costs seconds of CPU per mask (millions of parser steps in
// one Earley set; --max-grammar-mask-work counts sets and never trips).
constexpr char kSelfConcatLark[] = "start: start start | /./\n";
constexpr uint32_t kTokenA = 64;  // "a" in Qwen3

inline v1::CompileRequest GrammarRequest(const std::string& text, v1::Grammar::Format format) {
  v1::CompileRequest req;
  req.set_tokenizer("qwen3");
  req.mutable_grammar()->set_text(text);
  req.mutable_grammar()->set_format(format);
  req.set_wait(true);
  return req;
}

}  // namespace maskd::grammar_service_test

#endif  // MASKD_TESTS_SERVICE_GRAMMAR_SERVICE_TEST_UTIL_H_

// Shared helpers for index tests: where the bundled and shared tokenizers are.
#ifndef MASKD_TESTS_INDEX_TEST_UTIL_H_
#define MASKD_TESTS_INDEX_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer_context.h"
#include "tokenizer/vocabulary.h"

namespace maskd::testing {

// data/tokenizers/qwen3 in the source tree (always present).
std::string BundledTokenizerPath();
// ../shared/tokenizers/<name>, or "" when ../shared is absent.
std::string SharedTokenizerPath(const std::string& name);
// The five shared tokenizers' names.
const std::vector<std::string>& SharedTokenizerNames();
// Loads (and caches for the process) a shared tokenizer with its context (one
// per name and process, so its loop-mask memo is shared as in a server);
// null when absent.
std::shared_ptr<const TokenizerContext> SharedTokenizer(const std::string& name);
// SharedTokenizer(name)'s vocabulary; null when absent.
std::shared_ptr<const Vocabulary> SharedVocabulary(const std::string& name);
// Loads (and caches) the bundled tokenizer with its context; aborts the test
// binary on failure.
std::shared_ptr<const TokenizerContext> BundledTokenizer();
// BundledTokenizer()'s vocabulary.
std::shared_ptr<const Vocabulary> BundledVocabulary();

// `full`, or `quick` when MASKD_TEST_QUICK is set in the environment (the
// sanitizer run in CI sets it: the same checks on fewer random cases).
int Scaled(int full, int quick);

}  // namespace maskd::testing

#endif  // MASKD_TESTS_INDEX_TEST_UTIL_H_

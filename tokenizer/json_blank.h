// Blanking a large JSON value the loader never reads, so the parser never
// builds it: tokenizer.json's "merges" is 75% of gemma3's 33 MB, and a DOM
// parse pays for every byte of it (tape, strings, page faults).
// Private to the tokenizer library.
#ifndef MASKD_TOKENIZER_JSON_BLANK_H_
#define MASKD_TOKENIZER_JSON_BLANK_H_

#include <cstddef>
#include <string_view>

namespace maskd::internal {

// For every object member named `key` (no characters needing a JSON escape)
// whose value is an array, overwrites the array's contents with spaces,
// leaving "[   ...   ]": the document stays the same size and, when it was
// valid JSON, stays valid with that array empty and every other value
// unchanged. An unescaped `"key"` followed by ':' is always a member name in
// valid JSON, so no string content is ever touched. On malformed input it
// blanks nothing it cannot bracket-match; what it does blank is no longer
// validated. Returns the number of arrays blanked. Scans at SIMD speed
// (SSE2) outside strings with backslashes.
size_t BlankArrayValues(char* json, size_t size, std::string_view key);

// Index of the ']' that closes the '[' at json[open], or npos when the input
// ends first or a '}' closes it. Exposed for tests.
size_t MatchingBracket(const char* json, size_t size, size_t open);

}  // namespace maskd::internal

#endif  // MASKD_TOKENIZER_JSON_BLANK_H_

#include "tokenizer/json_blank.h"

#include <cstdint>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace maskd::internal {
namespace {

constexpr size_t kNpos = std::string_view::npos;

// Scanner state between bytes: inside a string, just after a backslash in a
// string, and the bracket depth relative to the opening '['.
struct ScanState {
  bool in_string = false;
  bool escape = false;
  int64_t depth = 0;
};

// Advances over json[i, end) byte by byte. Returns the index where depth
// returns to 0 (its ']'), kNpos when it does not, or `bad` on a '}'
// closing the array.
size_t ScalarScan(const char* json, size_t i, size_t end, ScanState* st, bool* bad) {
  for (; i < end; ++i) {
    char c = json[i];
    if (st->in_string) {
      if (st->escape) {
        st->escape = false;
      } else if (c == '\\') {
        st->escape = true;
      } else if (c == '"') {
        st->in_string = false;
      }
    } else if (c == '"') {
      st->in_string = true;
    } else if (c == '[' || c == '{') {
      ++st->depth;
    } else if (c == ']' || c == '}') {
      if (--st->depth == 0) {
        if (c == '}') *bad = true;
        return i;
      }
    }
  }
  return kNpos;
}

#if defined(__SSE2__)
uint64_t Mask16(__m128i v, char c) {
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c))));
}

// Bit k of the result is the xor of bits 0..k of x.
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}
#endif

}  // namespace

size_t MatchingBracket(const char* json, size_t size, size_t open) {
  if (open >= size || json[open] != '[') return kNpos;
  ScanState st;
  bool bad = false;
  size_t i = open;
#if defined(__SSE2__)
  // 64 bytes at a time: bitmasks of quotes, backslashes, openers, closers.
  // Blocks with a backslash (or after one) go byte by byte; elsewhere a
  // string is the span between quotes (prefix xor), and brackets inside
  // strings are dropped. A block is walked bit by bit only when it may
  // bring the depth back to 0.
  while (i + 64 <= size) {
    uint64_t q = 0, bs = 0, op = 0, cl = 0;
    for (int k = 0; k < 4; ++k) {
      __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(json + i + 16 * k));
      q |= Mask16(v, '"') << (16 * k);
      bs |= Mask16(v, '\\') << (16 * k);
      op |= (Mask16(v, '[') | Mask16(v, '{')) << (16 * k);
      cl |= (Mask16(v, ']') | Mask16(v, '}')) << (16 * k);
    }
    if (bs != 0 || st.escape) {
      size_t r = ScalarScan(json, i, i + 64, &st, &bad);
      if (r != kNpos) return bad ? kNpos : r;
      i += 64;
      continue;
    }
    uint64_t inside = PrefixXor(q) ^ (st.in_string ? ~uint64_t{0} : 0);
    op &= ~inside;
    cl &= ~inside;
    st.in_string = (inside >> 63) != 0;
    int64_t closes = __builtin_popcountll(cl);
    if (st.depth > closes) {
      st.depth += __builtin_popcountll(op) - closes;
    } else {
      for (uint64_t events = op | cl; events != 0; events &= events - 1) {
        int bit = __builtin_ctzll(events);
        if ((op >> bit) & 1) {
          ++st.depth;
        } else if (--st.depth == 0) {
          return json[i + bit] == ']' ? i + bit : kNpos;
        }
      }
    }
    i += 64;
  }
#endif
  size_t r = ScalarScan(json, i, size, &st, &bad);
  return bad ? kNpos : r;
}

size_t BlankArrayValues(char* json, size_t size, std::string_view key) {
  std::string pattern(key.size() + 2, '"');  // "key"
  pattern.replace(1, key.size(), key.data(), key.size());
  size_t blanked = 0;
  size_t pos = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (pos < size) {
    const void* hit = memmem(json + pos, size - pos, pattern.data(), pattern.size());
    if (hit == nullptr) break;
    size_t q = static_cast<const char*>(hit) - json;
    pos = q + 1;
    // An escaped quote (odd run of backslashes) is string content.
    size_t run = 0;
    while (run < q && json[q - 1 - run] == '\\') ++run;
    if (run % 2 != 0) continue;
    size_t i = q + pattern.size();
    while (i < size && is_space(json[i])) ++i;
    if (i >= size || json[i] != ':') continue;
    ++i;
    while (i < size && is_space(json[i])) ++i;
    if (i >= size || json[i] != '[') continue;
    size_t close = MatchingBracket(json, size, i);
    if (close == kNpos) break;  // malformed: leave it all to the parser
    std::memset(json + i + 1, ' ', close - i - 1);
    ++blanked;
    pos = close + 1;
  }
  return blanked;
}

}  // namespace maskd::internal

// lark_accepts: the maskd side of tests/grammar/lark_oracle.py.
//
//   lark_accepts GRAMMAR.lark [--print | --sample N SEED] < texts.jsonl
//
// Parses the Lark grammar; prints "ERROR <message>" and exits 2 when it is
// refused. Otherwise prints "OK", reads one JSON string per input line and
// prints 1 or 0 per line: whether the reference Earley recognizer accepts it
// ("E <message>" when the recognizer gives up). Each text is also run through
// the incremental parser the token-mask engine uses (earley_parser.h, which
// places ignored text differently): where one gives up, the other's answer
// is printed; where they answer 1 and 0, "D reference R parser P", and the
// exit status is 3.
// --print writes the lowered grammar instead; --sample prints N accepted
// texts (JSON strings, one per line) from random walks over the bytes the
// recognizer allows next.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammar/earley_parser.h"
#include "grammar/lark_parser.h"

namespace {

// Whether the incremental parser accepts `text`: "1", "0", or "E <message>".
std::string ParserAnswer(const std::shared_ptr<const maskd::grammar::CompiledGrammar>& g,
                         const std::string& text) {
  auto parser = maskd::grammar::EarleyParser::Create(g);
  if (!parser.ok()) return "E " + std::string(parser.status().message());
  for (char c : text) {
    auto live = parser->Push(static_cast<uint8_t>(c));
    if (!live.ok()) return "E " + std::string(live.status().message());
    if (!*live) return "0";
  }
  return parser->IsAccepting() ? "1" : "0";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: lark_accepts GRAMMAR.lark [--print] < texts.jsonl\n";
    return 64;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  auto g = maskd::grammar::ParseLark(buf.str());
  if (!g.ok()) {
    std::cout << "ERROR " << g.status().message() << "\n";
    return 2;
  }
  if (argc > 2 && std::string(argv[2]) == "--print") {
    std::cout << maskd::grammar::ToText(*g);
    return 0;
  }
  auto r = maskd::grammar::EarleyRecognizer::Create(*g);
  if (!r.ok()) {
    std::cout << "ERROR " << r.status().message() << "\n";
    return 2;
  }
  std::cout << "OK\n";
  if (argc > 4 && std::string(argv[2]) == "--sample") {
    int n = std::stoi(argv[3]);
    std::mt19937 rng(std::stoul(argv[4]));
    int emitted = 0;
    for (int attempt = 0; emitted < n && attempt < 50 * n; ++attempt) {
      std::string text;
      size_t max_len = 4 + rng() % 60;
      while (true) {
        auto acc = r->Accepts(text);
        if (!acc.ok()) break;
        if (*acc && (text.size() >= max_len || rng() % 8 == 0)) {
          std::cout << nlohmann::json(text).dump() << "\n";
          ++emitted;
          break;
        }
        if (text.size() >= 2 * max_len) break;
        auto next = r->NextBytes(text);
        if (!next.ok() || next->none()) break;
        // Prefer printable ASCII so that texts stay readable; other bytes
        // (UTF-8, controls) stay possible.
        std::vector<int> ascii, other;
        for (int b = 0; b < 256; ++b) {
          if (!(*next)[b]) continue;
          (b >= 0x20 && b < 0x7F ? ascii : other).push_back(b);
        }
        bool pick_ascii = !ascii.empty() && (other.empty() || rng() % 10 != 0);
        const auto& from = pick_ascii ? ascii : other;
        text.push_back(static_cast<char>(from[rng() % from.size()]));
      }
    }
    return 0;
  }
  auto compiled = maskd::grammar::CompiledGrammar::Create(*g);
  if (!compiled.ok()) {
    std::cout << "D reference compiles, parser: " << compiled.status().message() << "\n";
    return 3;
  }
  bool differ = false;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string text = nlohmann::json::parse(line).get<std::string>();
    auto a = r->Accepts(text);
    const std::string reference =
        a.ok() ? (*a ? "1" : "0") : "E " + std::string(a.status().message());
    const std::string parser = ParserAnswer(*compiled, text);
    // One over a limit (or both) is no disagreement: the other's answer.
    if (reference == parser || parser[0] == 'E') {
      std::cout << reference << "\n";
    } else if (reference[0] == 'E') {
      std::cout << parser << "\n";
    } else {
      std::cout << "D reference " << reference << " parser " << parser << "\n";
      differ = true;
    }
    std::cout.flush();
  }
  return differ ? 3 : 0;
}

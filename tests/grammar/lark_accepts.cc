// lark_accepts: the maskd side of tests/grammar/lark_oracle.py.
//
//   lark_accepts GRAMMAR.lark [--print | --sample N SEED] < texts.jsonl
//
// Parses the Lark grammar; prints "ERROR <message>" and exits 2 when it is
// refused. Otherwise prints "OK", reads one JSON string per input line and
// prints 1 or 0 per line: whether the reference Earley recognizer accepts it
// ("E <message>" when the recognizer gives up). --print writes the lowered
// grammar instead; --sample prints N accepted texts (JSON strings, one per
// line) from random walks over the bytes the recognizer allows next.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "grammar/earley.h"
#include "grammar/lark_parser.h"

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
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string text = nlohmann::json::parse(line).get<std::string>();
    auto a = r->Accepts(text);
    if (!a.ok()) {
      std::cout << "E " << a.status().message() << "\n";
    } else {
      std::cout << (*a ? "1" : "0") << "\n";
    }
    std::cout.flush();
  }
  return 0;
}

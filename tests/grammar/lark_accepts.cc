// lark_accepts: the maskd side of tests/grammar/lark_oracle.py.
//
//   lark_accepts GRAMMAR.lark [--print] < texts.jsonl
//
// Parses the Lark grammar; prints "ERROR <message>" and exits 2 when it is
// refused. Otherwise reads one JSON string per input line and prints 1 or 0
// per line: whether the reference Earley recognizer accepts it ("E <message>"
// when the recognizer gives up). --print writes the lowered grammar instead.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

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

// maskctl: maskd's command line. See `maskctl help`.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

#include "tools/maskctl/command.h"

namespace maskctl {
namespace {

struct Entry {
  const char* usage;
  CommandFn fn;
};

std::map<std::string, Entry>& Registry() {
  static auto* registry = new std::map<std::string, Entry>();
  return *registry;
}

void PrintUsage(std::FILE* out) {
  std::fprintf(out, "usage: maskctl [--addr ADDR] [--tls_ca F [--tls_cert F --tls_key F]] <command> [args]\n\ncommands:\n");
  for (const auto& [name, entry] : Registry()) std::fprintf(out, "  %s\n", entry.usage);
}

}  // namespace

CommandRegistrar::CommandRegistrar(const char* name, const char* usage, CommandFn fn) {
  Registry()[name] = Entry{usage, fn};
}

int Fail(const std::string& command, const std::string& message) {
  std::cerr << "maskctl " << command << ": " << message << std::endl;
  return kExitError;
}

}  // namespace maskctl

int main(int argc, char** argv) {
  maskctl::Context ctx;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--addr" && i + 1 < argc) {
      ctx.addr = argv[++i];
    } else if (a.rfind("--addr=", 0) == 0) {
      ctx.addr = a.substr(7);
    } else if (a.rfind("--tls_", 0) == 0 || a.rfind("--tls-", 0) == 0) {
      // --tls_ca FILE, --tls_cert FILE, --tls_key FILE (or --tls-ca=FILE ...)
      std::string name = a.substr(6), value;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      }
      if (value.empty()) {  // a TLS flag without its file must not fall back to plaintext
        std::fprintf(stderr, "maskctl: %s needs a file\n", a.c_str());
        return maskctl::kExitError;
      }
      if (name == "ca") {
        ctx.tls_ca = value;
      } else if (name == "cert") {
        ctx.tls_cert = value;
      } else if (name == "key") {
        ctx.tls_key = value;
      } else {
        std::fprintf(stderr, "maskctl: unknown flag '%s'\n", a.c_str());
        return maskctl::kExitError;
      }
    } else {
      break;
    }
  }
  if (i >= argc || std::strcmp(argv[i], "help") == 0 || std::strcmp(argv[i], "--help") == 0) {
    maskctl::PrintUsage(i >= argc ? stderr : stdout);
    return i >= argc ? maskctl::kExitError : 0;
  }
  std::string name = argv[i++];
  auto it = maskctl::Registry().find(name);
  if (it == maskctl::Registry().end()) {
    std::fprintf(stderr, "maskctl: unknown command '%s' (see maskctl help)\n", name.c_str());
    return maskctl::kExitError;
  }
  for (; i < argc; ++i) ctx.args.emplace_back(argv[i]);
  return it->second.fn(ctx);
}

// maskctl subcommands register themselves here; main() dispatches on argv[1]
// (after the global --addr flag, when present).
//
// Output contract shared by every subcommand: results are JSON objects, one
// per line, on stdout; errors are one line on stderr and exit status 2 (a
// subcommand may define other non-zero statuses, e.g. walk's 3).
#ifndef MASKD_TOOLS_MASKCTL_COMMAND_H_
#define MASKD_TOOLS_MASKCTL_COMMAND_H_

#include <string>
#include <vector>

namespace maskctl {

struct Context {
  std::string addr;                // --addr, empty when not given
  std::string tls_ca;              // --tls_ca: PEM file; set: TLS to a TCP --addr
  std::string tls_cert, tls_key;   // --tls_cert/--tls_key: client certificate (mutual TLS)
  std::vector<std::string> args;   // the subcommand's own arguments
};

using CommandFn = int (*)(const Context&);

struct CommandRegistrar {
  CommandRegistrar(const char* name, const char* usage, CommandFn fn);
};

// Exit status for usage and runtime errors.
inline constexpr int kExitError = 2;

// Prints "maskctl <cmd>: <message>" to stderr and returns kExitError.
int Fail(const std::string& command, const std::string& message);

}  // namespace maskctl

// Registers `fn` as subcommand `name`. Use once per subcommand, at file scope.
#define MASKCTL_COMMAND(name, usage, fn) \
  static ::maskctl::CommandRegistrar maskctl_registrar_##fn(name, usage, fn)

#endif  // MASKD_TOOLS_MASKCTL_COMMAND_H_

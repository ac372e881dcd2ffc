// maskctl: maskd's command line. See `maskctl help` and command.h.
#include <string>
#include <vector>

#include "tools/maskctl/command.h"

int main(int argc, char** argv) {
  return maskctl::RunMaskctl(std::vector<std::string>(argv + 1, argv + argc));
}

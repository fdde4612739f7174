// hwfarmctl: a thin main around hwfarm::cli::runHwfarmctl.
#include <iostream>

#include "daemon/cli/hwfarmctl.h"

int main(int argc, char** argv) {
  return hwfarm::cli::runHwfarmctl(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}

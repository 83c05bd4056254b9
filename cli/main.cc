// kubectl-nvl72: the kubectl plugin (kubectl finds it on PATH as `kubectl nvl72 ...`).
#include <iostream>
#include <string>
#include <vector>

#include "cli/app.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return nvl72::cli::Run(args, nvl72::cli::ConnectFromKubeconfig, std::cout, std::cerr);
}

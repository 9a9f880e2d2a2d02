#pragma once
// Subcommands of the `reach` CLI.  Each returns the process exit code.
#include <string>
#include <vector>

namespace reach::cli {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);

}  // namespace reach::cli

#pragma once
// Subcommands of the `reach` CLI.  Each returns the process exit code.
#include <string>
#include <vector>

namespace reach::cli {

using Args = std::vector<std::string>;

int cmd_info(const Args& args);
int cmd_selftest(const Args& args);
// Exit code of `reach run` when the GPU was lost while it ran (README, "A lost GPU"): not 1 (a bad input or
// option), so that a script can tell a run to retry with smaller settings.
constexpr int kExitDeviceLost = 3;
int cmd_run(const Args& args);
int cmd_bench(const Args& args);
int cmd_tune(const Args& args);
int cmd_eval(const Args& args);
int cmd_quantize(const Args& args);
int cmd_serve(const Args& args);

}  // namespace reach::cli

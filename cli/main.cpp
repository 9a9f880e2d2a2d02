// The `reach` command line: run, bench, eval, info.
#include <cstdio>
#include <cstring>
#include <string>

#include "engine/error.hpp"
#include "cli/commands.hpp"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: reach COMMAND [options]\n"
               "\n"
               "commands:\n"
               "  info [--json]        list Vulkan devices and their capabilities\n"
               "  selftest             run each basic kernel once vs a CPU reference\n"
               "  run -m DIR -p TEXT   generate text from a prompt\n"
               "  bench -m DIR         prompt-processing and generation speed (llama-bench style)\n"
               "  eval -m DIR -f TEXT  long-context evaluation: loss / perplexity / passkey per scheme x context\n"
               "\n"
               "Run `reach COMMAND --help` for a command's options.\n"
               "Environment: REACH_DEVICE (index or name), REACH_VALIDATION=1, REACH_CACHE_DIR.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  reach::cli::Args args(argv + 2, argv + argc);
  try {
    if (cmd == "info") return reach::cli::cmd_info(args);
    if (cmd == "selftest") return reach::cli::cmd_selftest(args);
    if (cmd == "eval") return reach::cli::cmd_eval(args);
    if (cmd == "run") return reach::cli::cmd_run(args);
    if (cmd == "bench") return reach::cli::cmd_bench(args);
    std::fprintf(stderr, "reach: unknown command '%s'\n\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const reach::Error& e) {
    std::fprintf(stderr, "reach %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reach %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}

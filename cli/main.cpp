// The `reach` command line: run, bench, eval, quantize, info.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "base/error.hpp"
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
               "  quantize IN OUT.gguf --type T   write a model folder as a GGUF (q8_0, q4_0, q4_k, f16, f32)\n"
#ifdef REACH_HAVE_SERVE
               "  serve -m DIR         OpenAI-compatible HTTP server (completions, chat, streaming)\n"
#endif
               "\n"
               "Run `reach COMMAND --help` for a command's options.\n"
               "Environment: REACH_DEVICE (index or name), REACH_VALIDATION=1, REACH_CACHE_DIR.\n");
}

// Library errors name parameters ("the context"); the CLI adds the flags of
// `cmd` that set them.
std::string flag_hint(const std::string& cmd, const reach::Error& e) {
  using reach::ErrorCode;
  if (e.code() != ErrorCode::context_overflow && e.code() != ErrorCode::out_of_memory) return "";
  if (cmd == "run")
    return e.code() == ErrorCode::context_overflow ? " (--ctx N sets the context, -n N the tokens to generate)"
                                                   : " (--ctx N sets the context)";
  if (cmd == "eval") return " (--ctx L1,L2,... sets the contexts)";
  if (cmd == "bench") return " (the context is -d N + max(-p N, -n N) + 1)";
  return "";
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
    if (cmd == "quantize") return reach::cli::cmd_quantize(args);
#ifdef REACH_HAVE_SERVE
    if (cmd == "serve") return reach::cli::cmd_serve(args);
#else
    if (cmd == "serve") {
      std::fprintf(stderr, "reach serve: this build has no HTTP server: install libcpp-httplib-dev "
                           "(tools/setup.sh does) and reconfigure (meson setup --reconfigure build)\n");
      return 2;
    }
#endif
    std::fprintf(stderr, "reach: unknown command '%s'\n\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const reach::Error& e) {
    std::fprintf(stderr, "reach %s: error: %s%s\n", cmd.c_str(), e.what(), flag_hint(cmd, e).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes from config.json and the options are checked before anything is
    // allocated; what is left is a machine with too little memory.
    std::fprintf(stderr, "reach %s: error: out of host memory - close other programs, or use a smaller model or "
                         "context\n", cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reach %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}

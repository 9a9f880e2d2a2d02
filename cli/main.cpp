// The `reach` command line: info, selftest, run, bench, tune, eval, quantize, serve.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/platform/file_names.hpp"
#include "cli/commands.hpp"
#include "cli/options.hpp"

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: reach COMMAND [options]\n"
               "\n"
               "commands:\n"
               "  info [--json]                   list Vulkan devices and their capabilities\n"
               "  selftest                        run each basic kernel once vs a CPU reference\n"
               "  run -m MODEL -p TEXT            generate text from a prompt\n"
               "  run -m MODEL --chat TEXT        answer a chat message through the model's chat template\n"
               "  bench -m MODEL                  prompt-processing and generation speed (llama-bench style)\n"
               "  tune -m MODEL                   measure exact vs int8 activations per phase; later sessions\n"
               "                                  of this model on this device run the faster\n"
               "  eval -m MODEL -f TEXT           long-context evaluation: loss / perplexity / passkey per\n"
               "                                  scheme x context\n"
               "  quantize IN OUT.gguf --type T   write a model folder as a GGUF (q8_0, q4_0, q4_k, f16, f32)\n"
               "  serve -m MODEL                  OpenAI-compatible HTTP server (completions, chat, streaming)\n"
               "\n"
               "MODEL is a model folder (config.json, *.safetensors, tokenizer.json), a .gguf file, or a folder\n"
               "holding one .gguf.  Run `reach COMMAND --help` for a command's options.\n"
               "\n"
               "environment:\n"
               "  REACH_DEVICE=N|NAME     device index or a substring of its name (`reach info` lists them)\n"
               "  REACH_VALIDATION=1      the Khronos validation layer, its messages on stderr\n"
               "  REACH_CACHE_DIR=DIR     where the pipeline cache is kept (default ~/.cache/reach; - = none)\n"
               "  REACH_PIPELINE_LOG=1    print each pipeline's creation time\n"
               "  REACH_TUNING_FILE=FILE  where reach tune keeps its choices (default ~/.cache/reach/tuning.json)\n"
               "  REACH_VULKAN_LIBRARY=F  the Vulkan loader to open (default libvulkan.so.1)\n"
               "  REACH_SUBMIT_MS=N       GPU time one submission of a forward pass aims to stay under (500; 0: none)\n"
               "  REACH_SUBMIT_LAYERS=N   at most N steps of a forward pass per submission (0: no cap)\n"
               "  REACH_FAULT=P:N:R       test hook: the Nth submit|wait|alloc fails with R (device_lost, ...)\n"
               "  REACH_DEVICE_PROFILE=F  a Vulkan Profiles JSON file: use only what it and the device allow\n"
               "  REACH_COOPMAT=0|1|quant prefill GEMMs without cooperative matrices, with them for float weights\n"
               "                          and on a CPU device too, or for the block types on any device\n"
               "                          (`reach info` lists the variant; default: block types on GPUs)\n"
               "  REACH_COOPMAT_XSPLIT=0  X as one f16 in those GEMMs, not two halves (to compare)\n"
               "  REACH_MATVEC_WG, REACH_MATVEC_ROWS, REACH_MATVEC_XSHARED=0\n"
               "                          the decode mat-vec's shape on a GPU (to compare shapes)\n"
               "  REACH_GEMM_TILE, REACH_GEMM_TM, REACH_GEMM_TN, REACH_GEMM_BK\n"
               "                          the shared-memory GEMM's tile on a GPU (to compare shapes)\n");
}

// An error message printed as "reach CMD: error: MESSAGE".  A message that starts with the prefix
// already ("reach run: unknown option") would print it twice: that start is dropped.
std::string without_prefix(const std::string& cmd, std::string message) {
  for (const std::string& p : {"reach " + cmd + ": error: ", "reach " + cmd + ": ", std::string("reach: ")})
    if (message.compare(0, p.size(), p) == 0) return message.substr(p.size());
  return message;
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
  // UTF-8 whatever the OS passes (Windows: its UTF-16 command line, not the ANSI code page's argv).
  const std::vector<std::string> argu = reach::platform::utf8_arguments(argc, argv);
  if (argu.size() < 2 || argu[1] == "-h" || argu[1] == "--help") {
    usage(argu.size() < 2 ? stderr : stdout);
    return argu.size() < 2 ? 2 : 0;
  }
  const std::string cmd = argu[1];
  reach::cli::Args args(argu.begin() + 2, argu.end());
  // The environment is read once, here; a variable whose value is not taken is said once.
  for (const std::string& why : reach::cli::cli_settings().ignored) std::fprintf(stderr, "reach: %s\n", why.c_str());
  try {
    if (cmd == "info") return reach::cli::cmd_info(args);
    if (cmd == "selftest") return reach::cli::cmd_selftest(args);
    if (cmd == "eval") return reach::cli::cmd_eval(args);
    if (cmd == "run") return reach::cli::cmd_run(args);
    if (cmd == "bench") return reach::cli::cmd_bench(args);
    if (cmd == "tune") return reach::cli::cmd_tune(args);
    if (cmd == "quantize") return reach::cli::cmd_quantize(args);
    if (cmd == "serve") return reach::cli::cmd_serve(args);
    std::fprintf(stderr, "reach: error: unknown command '%s'\n\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const reach::Error& e) {
    std::fprintf(stderr, "reach %s: error: %s%s\n", cmd.c_str(), without_prefix(cmd, e.what()).c_str(),
                 flag_hint(cmd, e).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // Sizes from config.json and the options are checked before anything is
    // allocated; what is left is a machine with too little memory.
    std::fprintf(stderr, "reach %s: error: out of host memory - close other programs, or use a smaller model or "
                         "context\n", cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reach %s: error: %s\n", cmd.c_str(), without_prefix(cmd, e.what()).c_str());
    return 1;
  }
}

#pragma once
// The jinja2 side of the chat-template suite (tests/test_chat_template*.cpp): conversations, the
// templates under test, and the comparison of reach's rendering with Python's jinja2 rendering of the
// same template text (tests/python/chat_template_ref.py, set up as transformers renders templates).
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/text/chat_template.hpp"
#include "tests/support/files.hpp"

namespace reach::test::chat_ref {

using json = nlohmann::ordered_json;

std::filesystem::path templates_dir();

using Command = CommandResult;
inline Command run(const std::string& cmd) { return capture_command(cmd); }
// A path printed by a command (its last line), or nullopt when it fails or the file is absent.
std::optional<std::filesystem::path> path_from(const std::string& cmd);

// Conversations every template renders, and those of the reasoning families.
std::vector<std::vector<ChatMessage>> conversations();
std::vector<std::vector<ChatMessage>> reasoning_conversations();
json to_json(const std::vector<ChatMessage>& conv);

// A template under test: reach's ChatTemplate and the reference's template source.
struct Subject {
  std::string name;
  ChatTemplate tmpl;
  json source;  // {"template_file": ...} / {"template_gguf": ...} / {"template": ...}
  std::string bos, eos;
  json variables = json::object();  // further template variables (enable_thinking)
  // Where the template reads its tools: "tools", "xml_tools" (SmolLM3), "system_tools" (Phi-4-mini: the
  // system message's "tools" field).
  std::string tools_variable = "tools";
};

// The day chat_template_ref.py's strftime_now formats (FIXED_DATE there).
constexpr ChatDate kFixedDate{2025, 7, 8};

// Renders every conversation with and without the generation prompt on both sides and compares.
// Returns false (with a message) when the reference cannot run.
// tools[i] (where given): the tools of convs[i], on both sides.
bool compare_with_jinja(const std::vector<Subject>& subjects,
                        const std::vector<std::vector<ChatMessage>>& convs = conversations(),
                        const std::vector<std::vector<ChatTool>>& tools = {});

Subject from_file(const std::string& file, const std::string& bos, const std::string& eos);
// The template rendered with enable_thinking false, on both sides.
Subject without_thinking(Subject s);
// The families added with Llama 3.1, with the special-token texts of their models.
std::vector<Subject> newer_subjects();

}  // namespace reach::test::chat_ref

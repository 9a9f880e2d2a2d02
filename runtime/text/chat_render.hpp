#pragma once
// The renderer of each chat family (chat_render.cpp), found through the family table of
// chat_template.cpp, and the helpers the recognition there shares with them.  Internal to
// runtime/text.
#include <span>
#include <string>
#include <string_view>

#include "runtime/text/chat_template.hpp"

namespace reach {

// One function per ChatFamily: the messages (at least one) as that family's prompt text.
struct ChatRender {
  using Fn = std::string (*)(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool> tools);
  static std::string chatml(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                            std::span<const ChatTool> tools);
  static std::string gemma(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                           std::span<const ChatTool> tools);
  static std::string llama3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                            std::span<const ChatTool> tools);
  static std::string llama2(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                            std::span<const ChatTool> tools);
  static std::string llama3_1(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                              std::span<const ChatTool> tools);
  static std::string qwen3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                           std::span<const ChatTool> tools);
  static std::string smollm3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool> tools);
  static std::string mistral(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool> tools);
  static std::string phi3(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                          std::span<const ChatTool> tools);
  static std::string phi4(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                          std::span<const ChatTool> tools);
  static std::string olmo2(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                           std::span<const ChatTool> tools);
  static std::string harmony(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                             std::span<const ChatTool> tools);

 private:
  // Phi-3.5 and Phi-4-mini: the same turns, Phi-3.5's with newlines.
  static std::string phi(const ChatTemplate& t, std::span<const ChatMessage> m, bool add_generation_prompt,
                         bool newlines);
};

namespace chat {

bool has(std::string_view text, std::string_view marker);

// Throws invalid_argument "origin: what", as a template raising.
[[noreturn]] void raise(const std::string& origin, const std::string& what);

// gpt-oss's "functions" namespace of the tools (chat_render_harmony.cpp), as its developer message holds it.
std::string harmony_tools(std::span<const ChatTool> tools, const std::string& origin);

}  // namespace chat

}  // namespace reach

#pragma once
// Chat templates: a conversation (system / user / assistant messages) as the prompt text a model
// was tuned on.
//
// Models ship their template as Jinja (tokenizer.chat_template in a GGUF, chat_template in
// tokenizer_config.json).  reach does not interpret Jinja: it recognises the template's family from
// its text and renders that family's format in C++.  Why:
//  - the templates of the models reach runs come in a handful of families, each a few lines of
//    string joining; a Jinja engine able to run them (filters, tests, namespaces, macros, loops,
//    trim_blocks / lstrip_blocks whitespace rules) would be a far larger and riskier piece of code
//    for the same output, and a GGUF's template is untrusted input that an interpreter would have
//    to bound (loops, recursion, string growth);
//  - a model without a template (Gemma 3 270M's GGUF carries none) still chats, from the turn tokens
//    of its vocabulary.
// The families, and what is taken from the template text beyond its family:
//  - ChatML (<|im_start|>: SmolLM2, Qwen2): the system turn the template writes when the
//    conversation has none (SmolLM2's "You are a helpful AI assistant named SmolLM, ...");
//  - Gemma (<start_of_turn>: Gemma 2 and 3): whether it starts with bos_token, and the separator
//    after a system message, which Gemma 3 puts before the first user message ('\n\n');
//    Gemma 2's template has no system role;
//  - Llama 3 (<|start_header_id|>): the original Llama 3 Instruct form (Llama 3.1's, with its
//    knowledge-date system header and tools, is not recognised);
//  - Llama 2 ([INST] with <<SYS>>).
// Anything else is ErrorCode::unsupported, naming the markers looked for.  tests/test_chat_template.cpp
// compares the output with Python's jinja2 rendering of the real templates.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reach {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatFamily { chatml, gemma, llama3, llama2 };

class ChatTemplate {
 public:
  // The family of a Jinja template's text; `origin` names it in errors.  bos_token / eos_token are
  // the texts the template's variables of those names stand for.  Throws unsupported.
  static ChatTemplate from_jinja(std::string_view text, const std::string& origin, std::string bos_token,
                                 std::string eos_token);
  // The tokenizer's chat_template(); without one, the family that the vocabulary's turn tokens name
  // (<start_of_turn>, <|start_header_id|>, <|im_start|>).  Throws unsupported when neither says.
  static ChatTemplate for_tokenizer(const Tokenizer& tokenizer, const std::string& origin);

  ChatFamily family() const { return family_; }
  const char* family_name() const;
  bool from_vocabulary() const { return from_vocabulary_; }  // no template text: recognised by tokens

  // The prompt text, special tokens written out as text (encode them with special-token matching).
  // add_generation_prompt opens the assistant's turn.  Throws invalid_argument where the template
  // itself raises (roles not alternating user/assistant, a system role it has no place for, no
  // messages).
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  // The token text that ends an assistant turn: <|im_end|>, <end_of_turn>, <|eot_id|>, or the EOS
  // text for Llama 2.
  std::string end_of_turn() const;

 private:
  ChatFamily family_ = ChatFamily::chatml;
  std::string origin_;
  std::string bos_, eos_;
  bool from_vocabulary_ = false;
  bool writes_bos_ = false;            // gemma: the template starts with bos_token
  bool has_default_system_ = false;    // chatml
  std::string default_system_;
  bool system_role_ = true;            // gemma: false for Gemma 2's template
  std::string system_separator_;       // gemma: after the system text, before the first user message
};

// A conversation as the prompt of the assistant's next turn, and the tokens that end that turn.
struct ChatPrompt {
  std::vector<int32_t> ids;        // the prompt
  std::vector<int32_t> stop_ids;   // the end-of-turn token and the tokenizer's EOS, where the vocabulary has them
};

// The template rendered with the assistant's turn opened, encoded (special tokens matched).  The
// tokenizer's own prefix (BOS) is added only where the rendered text does not start with it already:
// Gemma's and Llama's templates write bos_token themselves, and a doubled BOS degrades the reply.
// Throws what render() and encode() throw.
ChatPrompt encode_chat(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                       std::span<const ChatMessage> messages);

}  // namespace reach

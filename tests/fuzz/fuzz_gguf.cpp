// GGUF files (runtime/gguf*, runtime/text/tokenizer_gguf.cpp): GgufFile::open on
// arbitrary bytes; a file that opens has every tensor's bytes read and every
// key read through the typed accessors, then model_config_from_gguf and
// Tokenizer::from_gguf; a tokenizer that loads encodes and decodes fixed texts
// and ids and writes itself back as metadata (to_gguf).  Input: the file as is.
#include <climits>
#include <optional>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "runtime/config/gguf_config.hpp"
#include "runtime/formats/gguf.hpp"
#include "runtime/formats/gguf_meta_sink.hpp"
#include "runtime/text/tokenizer.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

// Counts what it is given, so the writer side of to_gguf runs to the end.
class NullSink : public reach::GgufMetaSink {
 public:
  size_t n = 0;
  void put_string(std::string_view, std::string_view v) override { n += v.size(); }
  void put_u32(std::string_view, uint32_t) override { ++n; }
  void put_i32(std::string_view, int32_t) override { ++n; }
  void put_f32(std::string_view, float) override { ++n; }
  void put_bool(std::string_view, bool) override { ++n; }
  void put_string_array(std::string_view, const std::vector<std::string>& v) override { n += v.size(); }
  void put_i32_array(std::string_view, const std::vector<int32_t>& v) override { n += v.size(); }
  void put_f32_array(std::string_view, const std::vector<float>& v) override { n += v.size(); }
};

void read_everything(const reach::GgufFile& f) {
  volatile unsigned sink = 0;
  for (const auto& t : f.tensors()) {
    // Every byte of every tensor: a range past the mapping faults here.
    unsigned sum = 0;
    for (uint64_t i = 0; i < t.nbytes; ++i) sum += std::to_integer<unsigned>(t.data[i]);
    sink = sink + sum;
    if (f.find_tensor(t.name) != &t) __builtin_trap();
    (void)t.ne_string();
    (void)t.shape();
    if (t.numel() <= 0) __builtin_trap();
  }
  for (const std::string& key : f.keys()) {
    const reach::GgufValue* v = f.find(key);
    if (!v) __builtin_trap();
    (void)v->type_string();
    try {
      switch (v->type) {
        case reach::GgufType::string: sink = sink + f.get_string(key).size(); break;
        case reach::GgufType::boolean: sink = sink + f.get_bool(key); break;
        case reach::GgufType::f32:
        case reach::GgufType::f64: sink = sink + static_cast<unsigned>(f.get_f64(key) != 0); break;
        case reach::GgufType::array:
          sink = sink + f.array_size(key);
          if (v->elem_type == reach::GgufType::string) sink = sink + f.get_string_array(key).size();
          else if (v->elem_type == reach::GgufType::f32) sink = sink + f.get_f32_array(key).size();
          else sink = sink + f.get_int_array(key).size();
          break;
        default: sink = sink + static_cast<unsigned>(f.get_i64(key)); break;
      }
    } catch (const reach::Error&) {
      // A value of a type that accessor refuses (u64 past 2^63, arrays of arrays): a message.
    }
  }
}

void use_tokenizer(const reach::Tokenizer& tok) {
  reach::fuzz::exercise_tokenizer(tok);
  (void)tok.chat_template();
  NullSink sink;
  try {
    tok.to_gguf(sink);
  } catch (const reach::Error&) {
    // What GGUF cannot say is refused with a message.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static reach::fuzz::MemFile file("model.gguf");
  std::optional<reach::GgufFile> f;
  try {
    f.emplace(reach::GgufFile::open(file.write(data, size)));
  } catch (const reach::Error&) {
    return 0;  // rejected with a message: what a hostile file should get
  }
  if (f->data_offset() > f->file_size()) __builtin_trap();
  read_everything(*f);
  try {
    (void)reach::model_config_from_gguf(*f).describe();
  } catch (const reach::Error&) {
  }
  try {
    use_tokenizer(reach::Tokenizer::from_gguf(*f));
  } catch (const reach::Error&) {
  }
  return 0;
}

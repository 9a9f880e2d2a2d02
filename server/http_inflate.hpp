#pragma once
// A request body's Content-Encoding undone as the bytes arrive, with the decoded size capped: a small
// gzip body that would inflate to gigabytes stops at the cap, never past it.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace reach::server {

enum class BodyEncoding { identity, gzip, deflate };

class Inflater {
 public:
  Inflater(BodyEncoding encoding, size_t max_out);
  ~Inflater();
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  enum class Result { ok, too_large, corrupt };
  // Appends the decoded bytes of `in` to `out`; too_large as soon as `out` would pass max_out.
  Result feed(std::string_view in, std::string& out);
  // Whether the compressed stream ended where it should (false: truncated).
  bool finished() const { return ended_; }

 private:
  struct Stream;
  std::unique_ptr<Stream> z_;
  size_t max_out_;
  bool ended_ = false;
};

}  // namespace reach::server

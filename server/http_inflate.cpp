#include "server/http_inflate.hpp"

#include <zlib.h>

namespace reach::server {

struct Inflater::Stream {
  z_stream s{};
};

Inflater::Inflater(BodyEncoding encoding, size_t max_out) : z_(std::make_unique<Stream>()), max_out_(max_out) {
  // gzip: the gzip wrapper; deflate: HTTP's "deflate" is the zlib wrapper, and 32 lets zlib detect either.
  const int window_bits = encoding == BodyEncoding::gzip ? 15 + 16 : 15 + 32;
  if (inflateInit2(&z_->s, window_bits) != Z_OK) z_.reset();
}

Inflater::~Inflater() {
  if (z_) inflateEnd(&z_->s);
}

Inflater::Result Inflater::feed(std::string_view in, std::string& out) {
  if (!z_) return Result::corrupt;
  if (ended_) return in.empty() ? Result::ok : Result::corrupt;  // bytes after the end of the stream
  z_stream& s = z_->s;
  s.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  s.avail_in = uInt(in.size());
  char buf[16384];
  // Until the input is used up and zlib holds no more output (a full buffer may mean more is pending).
  for (;;) {
    s.next_out = reinterpret_cast<Bytef*>(buf);
    s.avail_out = sizeof buf;
    const int rc = inflate(&s, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) return Result::corrupt;
    const size_t produced = sizeof buf - s.avail_out;
    if (out.size() + produced > max_out_) return Result::too_large;
    out.append(buf, produced);
    if (rc == Z_STREAM_END) {
      ended_ = true;
      break;
    }
    if (produced == 0 || (s.avail_in == 0 && s.avail_out > 0)) break;
  }
  if (ended_ && s.avail_in > 0) return Result::corrupt;
  return Result::ok;
}

}  // namespace reach::server

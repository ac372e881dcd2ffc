#include "tokenizer/json_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer_json.h"

namespace maskd::internal {
namespace {

// absl::string_view is not std::string_view in this Abseil build.
inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status FileError(const std::string& path, std::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", Av(problem)));
}

// Reads the whole file into a fresh buffer of size + kJsonPadding bytes
// (padding zeroed).
absl::Status ReadAll(const std::string& path, std::unique_ptr<char[]>* data, size_t* size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return FileError(path, "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxJsonBytes) {
    ::close(fd);
    return FileError(path, absl::StrCat("file is larger than ", kMaxJsonBytes, " bytes"));
  }
  size_t n = static_cast<size_t>(st.st_size);
  auto buf = std::unique_ptr<char[]>(new char[n + kJsonPadding]);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, buf.get() + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = errno;
      ::close(fd);
      return FileError(path, r == 0 ? std::string("file shrank while reading")
                                    : absl::StrCat("read error: ", std::strerror(err)));
    }
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  std::memset(buf.get() + n, 0, kJsonPadding);
  *data = std::move(buf);
  *size = n;
  return absl::OkStatus();
}

bool IsGzip(const char* p, size_t n) {
  return n >= 2 && static_cast<unsigned char>(p[0]) == 0x1f &&
         static_cast<unsigned char>(p[1]) == 0x8b;
}

// Inflates gzip data (one or more members) into a padded buffer.
absl::Status Gunzip(const std::string& path, const char* in, size_t in_size,
                    std::unique_ptr<char[]>* data, size_t* size) {
  // The last member's trailer holds its uncompressed size mod 2^32: a good
  // first guess for the common single-member file.
  size_t cap = 1 << 16;
  if (in_size >= 18) {
    const auto* t = reinterpret_cast<const unsigned char*>(in + in_size - 4);
    size_t hint = t[0] | (t[1] << 8) | (t[2] << 16) | (size_t{t[3]} << 24);
    // Deflate expands at most ~1032:1; a larger "hint" is not a trailer.
    if (hint / 1032 <= in_size) cap = std::clamp<size_t>(hint, cap, kMaxJsonBytes);
  }
  auto out = std::unique_ptr<char[]>(new char[cap + kJsonPadding]);
  size_t out_size = 0;

  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 15 + 16) != Z_OK) return FileError(path, "zlib initialisation failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
  zs.avail_in = static_cast<uInt>(in_size);  // in_size <= kMaxJsonBytes < 4 GiB
  absl::Status status;
  while (true) {
    if (out_size == cap) {
      if (cap >= kMaxJsonBytes) {
        status = FileError(path, absl::StrCat("gunzipped document is larger than ",
                                              kMaxJsonBytes, " bytes"));
        break;
      }
      size_t new_cap = std::min(cap * 2, kMaxJsonBytes);
      auto bigger = std::unique_ptr<char[]>(new char[new_cap + kJsonPadding]);
      std::memcpy(bigger.get(), out.get(), out_size);
      out = std::move(bigger);
      cap = new_cap;
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.get() + out_size);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(cap - out_size, UINT_MAX));
    const uInt avail_before = zs.avail_out;
    int ret = inflate(&zs, Z_NO_FLUSH);
    out_size += avail_before - zs.avail_out;
    if (ret == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      if (!IsGzip(reinterpret_cast<const char*>(zs.next_in), zs.avail_in)) {
        status = FileError(path, "bad gzip data: trailing bytes after the gzip stream");
        break;
      }
      inflateReset(&zs);  // next member
    } else if (ret == Z_OK) {
      continue;
    } else if (ret == Z_BUF_ERROR && zs.avail_out == 0) {
      continue;  // grow and go on
    } else if (ret == Z_BUF_ERROR) {
      status = FileError(path, "bad gzip data: truncated");
      break;
    } else {
      status = FileError(path, absl::StrCat("bad gzip data: ",
                                            zs.msg != nullptr ? zs.msg : "inflate failed"));
      break;
    }
  }
  inflateEnd(&zs);
  if (!status.ok()) return status;
  std::memset(out.get() + out_size, 0, kJsonPadding);
  *data = std::move(out);
  *size = out_size;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JsonBuffer> ReadJsonFile(const std::string& path) {
  JsonBuffer buf;
  if (auto s = ReadAll(path, &buf.data_, &buf.size_); !s.ok()) return s;
  if (IsGzip(buf.data_.get(), buf.size_)) {
    JsonBuffer plain;
    if (auto s = Gunzip(path, buf.data_.get(), buf.size_, &plain.data_, &plain.size_); !s.ok()) {
      return s;
    }
    return plain;
  }
  return buf;
}

JsonBuffer CopyToJsonBuffer(std::string_view json) {
  JsonBuffer buf;
  buf.data_ = std::unique_ptr<char[]>(new char[json.size() + kJsonPadding]);
  if (!json.empty()) std::memcpy(buf.data_.get(), json.data(), json.size());
  std::memset(buf.data_.get() + json.size(), 0, kJsonPadding);
  buf.size_ = json.size();
  return buf;
}

}  // namespace maskd::internal

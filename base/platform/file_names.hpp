#pragma once
// File names are UTF-8 everywhere in reach; UTF-16 only at the Win32 boundary.
//
// std::filesystem::path holds the OS's own encoding (bytes on POSIX, UTF-16 on
// Windows).  path.string() and path(std::string) use the narrow encoding, which
// on Windows is the ANSI code page and loses or garbles any other character:
// convert with these instead, and open files through open_file() (or a stream
// constructed from a path, never from its string()).
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace reach::platform {

// The path as UTF-8 (path.u8string()), for messages, JSON and the C API.
std::string path_to_utf8(const std::filesystem::path& path);
// A path from UTF-8 text (a command-line argument, a JSON value, a C API string).
std::filesystem::path path_from_utf8(std::string_view utf8);

// fopen of a path whatever its characters (_wfopen on Windows); nullptr and
// the error in errno / last_error() on failure.  Mode as fopen's ("rb", "wb").
std::FILE* open_file(const std::filesystem::path& path, const char* mode);

// The program's arguments as UTF-8.  POSIX passes main's argv through (the
// bytes the user typed); Windows reads the UTF-16 command line
// (GetCommandLineW), since main's argv is in the ANSI code page.
std::vector<std::string> utf8_arguments(int argc, char** argv);

#ifdef _WIN32
std::wstring wide_from_utf8(std::string_view utf8);
std::string utf8_from_wide(std::wstring_view wide);
#endif

}  // namespace reach::platform

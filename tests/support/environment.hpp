#pragma once
// Setting environment variables in a test (the library reads none: base/settings.hpp).
// setenv and _putenv_s are the C library's, declared by <cstdlib>: no OS header.
#include <cstdlib>
#include <string>

namespace reach::test {

inline void set_environment(const std::string& name, const std::string& value) {
#ifdef _WIN32
  _putenv_s(name.c_str(), value.c_str());
#else
  ::setenv(name.c_str(), value.c_str(), 1);
#endif
}

inline void unset_environment(const std::string& name) {
#ifdef _WIN32
  _putenv_s(name.c_str(), "");   // an empty value removes the variable on Windows
#else
  ::unsetenv(name.c_str());
#endif
}

}  // namespace reach::test

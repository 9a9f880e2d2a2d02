#pragma once
// The text of the last failed system call, as the OS words it: strerror(errno)
// on POSIX, FormatMessageW(GetLastError()) as UTF-8 on Windows.  Read it right
// after the call that failed, before anything else can change the error.
#include <string>

namespace reach::platform {

// The calling thread's last system error (errno / GetLastError()).
int last_error();
// Its text: "No such file or directory", "The system cannot find the file specified."
std::string error_text(int code);
inline std::string last_error_text() { return error_text(last_error()); }

}  // namespace reach::platform

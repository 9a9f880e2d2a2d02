#pragma once
// The terminal the CLI draws on: whether a stream is one (the progress bar and
// dimmed reasoning only draw there), and ANSI escapes on a Windows console.
namespace reach::platform {

enum class Stream { out, err };

// isatty (POSIX); on Windows _isatty and a console mode (a NUL device is a
// character device too, but has no console mode).
bool is_terminal(Stream stream);

// Lets a Windows console interpret ANSI escapes (ENABLE_VIRTUAL_TERMINAL_PROCESSING);
// true where they work: a POSIX terminal, or a console that took the mode.
bool enable_ansi_escapes(Stream stream);

}  // namespace reach::platform

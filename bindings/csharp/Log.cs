// reach's messages (device choice, model loads, validation messages, failed calls at Debug) to a C#
// handler instead of stderr: Unity's Debug.Log, Godot's GD.Print.
using System;

namespace Reach
{
    public enum LogLevel
    {
        Debug = 0,
        Info = 1,
        Warn = 2,
        Error = 3,
    }

    public static class ReachLog
    {
        static Action<LogLevel, string> handler;
        // One delegate for the process, kept alive here: native code holds its pointer.
        static readonly ReachLogCallback trampoline = OnMessage;

        /// <summary>Routes every message to handler, on the thread that caused it (not always the main
        /// thread: queue them for the UI).  null restores the default: warnings and errors to stderr.
        /// Process-wide.</summary>
        public static void SetHandler(Action<LogLevel, string> h)
        {
            handler = h;
            ReachNative.reach_set_log_callback(h == null ? null : trampoline, IntPtr.Zero);
        }

        [MonoPInvokeCallback(typeof(ReachLogCallback))]
        static void OnMessage(IntPtr user, int level, IntPtr message)
        {
            Action<LogLevel, string> h = handler;
            if (h == null) return;
            try
            {
                h((LogLevel)level, Utf8.FromNative(message));
            }
            catch
            {
                // An exception must not unwind through reach's frames; the message is lost.
            }
        }
    }
}

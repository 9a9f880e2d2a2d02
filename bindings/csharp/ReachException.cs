// A failed reach call as an exception: the reach_status and reach_last_error()'s message, which names
// the file, limit or call at fault.
using System;

namespace Reach
{
    public class ReachException : Exception
    {
        /// <summary>The status the call returned (never Ok).</summary>
        public ReachStatus Status { get; private set; }

        /// <summary>reach_last_error() right after the failing call ("" if reach gave none).</summary>
        public string NativeMessage { get; private set; }

        /// <summary>The reach function that failed ("reach_model_load").</summary>
        public string Call { get; private set; }

        public ReachException(ReachStatus status, string call, string nativeMessage)
            : base(Compose(status, call, nativeMessage))
        {
            Status = status;
            Call = call;
            NativeMessage = nativeMessage;
        }

        // "REACH_ERROR_IO: reach_model_load: model path ... does not exist ...": reach's messages start with
        // the call's name; one that does not gets it put in front.
        static string Compose(ReachStatus status, string call, string nativeMessage)
        {
            string message = nativeMessage.StartsWith(call + ":", StringComparison.Ordinal) ? nativeMessage
                                                                                            : call + ": " + nativeMessage;
            return StatusName(status) + ": " + message;
        }

        /// <summary>reach_status_name: "REACH_ERROR_IO".</summary>
        public static string StatusName(ReachStatus status)
        {
            return Utf8.FromNative(ReachNative.reach_status_name(status));
        }

        /// <summary>Throws for any status but Ok.  reach_last_error() is per thread, and the P/Invoke call ran
        /// on this one, so it still holds that call's message here.</summary>
        internal static void Check(ReachStatus status, string call)
        {
            if (status == ReachStatus.Ok) return;
            string message = Utf8.FromNative(ReachNative.reach_last_error());
            if (status == ReachStatus.KvPoolFull) throw new KvPoolFullException(call, message);
            throw new ReachException(status, call, message);
        }
    }

    /// <summary>KvPoolFull: the session's KV pool had no block free for the step.  Nothing ran (the session
    /// and its logits are as before the call), so the same call can be retried once another session of the
    /// pool is disposed or rewinds.</summary>
    public sealed class KvPoolFullException : ReachException
    {
        public KvPoolFullException(string call, string nativeMessage)
            : base(ReachStatus.KvPoolFull, call, nativeMessage) { }
    }
}

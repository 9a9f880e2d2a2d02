// Failures as ReachException with the status, the call and reach's message; disposed handles.
using System;
using System.Collections.Generic;
using System.IO;
using System.Json;
using System.Linq;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Reach;

static partial class ReachTests
{
    static void Errors(Model model)
    {
        string missing = Path.Combine(Path.GetTempPath(), "reach-no-such-model-" + Guid.NewGuid().ToString("N"));
        try
        {
            using (Model.Load(missing, Options())) { }
            Check(false, "loading a missing folder throws");
        }
        catch (ReachException e)
        {
            lock (debugLines)
                Check(debugLines.Any(l => l.Contains(missing)), "the failed load reached the log handler at Debug");
            Check(e.Status == ReachStatus.IO && e.NativeMessage.Contains(missing) &&
                  e.Message.StartsWith("REACH_ERROR_IO: reach_model_load: model path ", StringComparison.Ordinal),
                  "a missing model folder throws IO naming it: " + e.Message);
        }
        try
        {
            using (model.CreateSession(new SessionOptions { SchemeFlags = "--bogus-flag 3" })) { }
            Check(false, "an unknown scheme flag throws");
        }
        catch (ReachException e)
        {
            Check(e.Status == ReachStatus.InvalidArgument && e.NativeMessage.Contains("--bogus-flag"),
                  "an unknown scheme flag throws InvalidArgument naming it: " + e.Message);
        }
        try
        {
            using (model.CreateSession(new SessionOptions { TopP = 0 })) { }
            Check(false, "top_p 0 throws");
        }
        catch (ReachException e)
        {
            Check(e.Status == ReachStatus.InvalidArgument && e.NativeMessage.Contains("top_p"),
                  "top_p 0 throws InvalidArgument naming the field: " + e.Message);
        }
        using (Session s = model.CreateSession(new SessionOptions { Temperature = 0, Context = 8 }))
        {
            try
            {
                s.GenerateText("one two three four five six seven eight nine ten", new GenerateOptions { MaxTokens = 4 });
                Check(false, "a prompt longer than the context throws");
            }
            catch (ReachException e)
            {
                Check(e.Status == ReachStatus.ContextOverflow && e.Call == "reach_session_prefill",
                      "a prompt longer than the context throws ContextOverflow: " + e.Message);
            }
            Check(s.Position == 0, "the failed prefill appended nothing");
        }
        Session gone = model.CreateSession(Greedy());
        gone.Dispose();
        try
        {
            gone.GenerateText("hi").ToString();
            Check(false, "a disposed session throws");
        }
        catch (ObjectDisposedException)
        {
            Check(true, "a disposed session throws ObjectDisposedException, never calls reach with a freed handle");
        }
    }
}

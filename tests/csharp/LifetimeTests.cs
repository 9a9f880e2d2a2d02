// Devices, loading (progress, cancel), and the order in which handles are freed: a session before its
// model, the model before its device, under Dispose in any order and under the finalizers.
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
    static void Devices()
    {
        DeviceInfo[] all = Device.List();
        Check(all.Length > 0 && all.All(d => d.Name.Length > 0), "Device.List names " + all.Length + " device(s): " +
              string.Join(", ", all.Select(d => d.Name)));
        using (Device d = Device.Create(new DeviceOptions { UseEnvironment = true, LowPriority = true }))
            Check(all.Any(x => x.Name == d.Info.Name), "the created device is one of the list: " + d.Info.Name);
        try
        {
            using (Device.Create(new DeviceOptions { Name = "no-such-gpu-" + Guid.NewGuid().ToString("N") })) { }
            Check(false, "a device name no device has throws");
        }
        catch (ReachException e)
        {
            Check(e.Status == ReachStatus.InvalidArgument && e.NativeMessage.Contains("no-such-gpu") &&
                  e.NativeMessage.Contains(all[0].Name), "a device name no device has throws InvalidArgument listing the devices: " + e.Message);
        }
    }

    static void Loading()
    {
        // Progress in bytes up to the total; a shared device outlives its models.
        var seen = new List<KeyValuePair<ulong, ulong>>();
        using (Device d = Device.Create(new DeviceOptions { UseEnvironment = true }))
        {
            using (Model m = Model.Load(modelDir, new ModelOptions { Device = d, Progress = (done, total) =>
                                                       { seen.Add(new KeyValuePair<ulong, ulong>(done, total)); return true; } }))
            {
                ulong total = seen.Count > 0 ? seen[seen.Count - 1].Value : 0;
                Check(seen.Count > 1 && total > 100000000UL && seen[seen.Count - 1].Key == total &&
                      seen.Zip(seen.Skip(1), (a, b) => a.Key <= b.Key && a.Value == b.Value).All(x => x),
                      "load progress rises to the total (" + seen.Count + " calls, " + total + " bytes)");
                Check(m.Info.WeightBytes > 0, "the model on a shared device loads");
            }
            int calls = 0;
            try
            {
                using (Model.Load(modelDir, new ModelOptions { Device = d, Progress = (done, total) => ++calls < 2 })) { }
                Check(false, "a progress callback returning false cancels the load");
            }
            catch (ReachException e)
            {
                Check(e.Status == ReachStatus.Cancelled && calls == 2, "a progress callback returning false cancels the load: " + e.Message);
            }
            try
            {
                using (Model.Load(modelDir, new ModelOptions { Device = d, Progress = (done, total) => { throw new InvalidOperationException("boom"); } })) { }
                Check(false, "a progress callback that throws cancels the load");
            }
            catch (ReachException e)
            {
                Check(e.Status == ReachStatus.Cancelled, "a progress callback that throws cancels the load (the exception stays in C#)");
            }
        }
    }

    static readonly List<string> released = new List<string>();

    static void Lifetimes()
    {
        ReachHandle.Released = (kind, status) => { lock (released) released.Add(kind + ":" + status); };

        // Dispose the model first: its free waits for the session's, then the model's own device goes.
        released.Clear();
        Model m = Model.Load(modelDir, Options());
        Session s = m.CreateSession(Greedy());
        m.Dispose();
        Check(released.Count == 0, "disposing a model with a live session frees nothing yet");
        try
        {
            s.GenerateText("Hello", new GenerateOptions { MaxTokens = 2 });
            Check(true, "the session still generates after its model was disposed");
        }
        catch (Exception e) { Check(false, "the session still generates after its model was disposed: " + e.Message); }
        s.Dispose();
        Check(string.Join(",", released) == "reply:Ok,session:Ok,model:Ok,device:Ok",
              "session, then model, then device freed, each Ok: " + string.Join(",", released));
        m.Dispose();
        s.Dispose();
        Check(released.Count == 4, "disposing twice frees nothing again and does not throw");

        // The finalizers, in whatever order the GC runs them.
        released.Clear();
        Abandon();
        for (int i = 0; i < 4 && released.Count < 3; i++)
        {
            GC.Collect();
            GC.WaitForPendingFinalizers();
        }
        Check(string.Join(",", released) == "session:Ok,model:Ok,device:Ok",
              "unreachable session, model and device are finalized in that order, each Ok: " + string.Join(",", released));
        ReachHandle.Released = null;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Abandon()
    {
        Model m = Model.Load(modelDir, Options());
        Session s = m.CreateSession(Greedy());
        s.Prefill(m.Tokenize("Hello"));
    }
}

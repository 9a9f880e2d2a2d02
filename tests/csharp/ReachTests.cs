// The C# binding (bindings/csharp) under Mono against the build's libreach.so, driven by
// tests/csharp/run_csharp_tests.py, which passes `reach run`'s greedy output and the C struct layout:
//  - the binding's struct declarations match the C layout (abi_layout.c);
//  - greedy SmolLM2 output (ids and text) equals `reach run --temp 0`'s, whole, streamed, through a
//    callback, one step per Poll (FrameReply), cut by a stop string and stopped early;
//  - greedy chat replies equal `reach run --chat`'s, and a second turn that reuses the session's
//    tokens equals a fresh session's;
//  - a JSON-schema NPC line parses and has the schema's fields, its mood one of the enum;
//  - failures surface as ReachException with the status and reach's message;
//  - disposing twice is harmless, and a session is always freed before its model, its model before
//    its device, whichever is disposed first and also when the finalizers free them;
//  - sessions in a KV pool generate what sessions of their own do, share a common prompt's blocks, get
//    KvPoolFullException when the pool is full, and are freed before their pool.
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
    static int failures, checks;
    static JsonObject reference;
    static string modelDir;

    static void Check(bool ok, string what)
    {
        checks++;
        if (!ok) { failures++; Console.WriteLine("FAIL: " + what); }
        else Console.WriteLine("ok: " + what);
    }

    // Validation-layer errors during the run (REACH_VALIDATION=1 through UseEnvironment) fail it.
    static readonly List<string> vulkanErrors = new List<string>();
    static void OnLog(LogLevel level, string text)
    {
        if (level == LogLevel.Error && text.StartsWith("vulkan:")) lock (vulkanErrors) vulkanErrors.Add(text);
        else if (level >= LogLevel.Warn) Console.Error.WriteLine("reach: " + text);
        if (level == LogLevel.Debug) lock (debugLines) debugLines.Add(text);
    }
    static readonly List<string> debugLines = new List<string>();

    static ModelOptions Options()
    {
        return new ModelOptions { DeviceOptions = new DeviceOptions { UseEnvironment = true } };
    }

    static SessionOptions Greedy()
    {
        return new SessionOptions { Temperature = 0, Context = 512 };
    }

    static int Main(string[] args)
    {
        if (args.Length != 3)
        {
            Console.Error.WriteLine("usage: ReachTests.exe MODEL_DIR REFERENCE_JSON LAYOUT_FILE");
            return 2;
        }
        modelDir = args[0];
        reference = (JsonObject)JsonValue.Parse(File.ReadAllText(args[1]));
        ReachLog.SetHandler(OnLog);
        Console.WriteLine("reach " + Marshal.PtrToStringAnsi(ReachNative.reach_version()));

        var tests = new List<KeyValuePair<string, Action>>();
        tests.Add(new KeyValuePair<string, Action>("layout", () => StructLayout(args[2])));
        tests.Add(new KeyValuePair<string, Action>("devices", Devices));
        tests.Add(new KeyValuePair<string, Action>("loading", Loading));
        tests.Add(new KeyValuePair<string, Action>("model", () =>
        {
            using (Model model = Model.Load(modelDir, Options()))
            {
                Check(model.Info.VocabSize == 49152 && model.Info.HasTokenizer, "model info: SmolLM2's vocabulary, a tokenizer");
                TextAndLogits(model);
                Greedy(model);
                Chat(model);
                JsonNpc(model);
                Errors(model);
            }
        }));
        tests.Add(new KeyValuePair<string, Action>("lifetimes", Lifetimes));
        tests.Add(new KeyValuePair<string, Action>("kv pool", KvPools));
        foreach (var t in tests)
        {
            Console.WriteLine("--- " + t.Key);
            try { t.Value(); }
            catch (Exception e) { Check(false, t.Key + " threw " + e); }
        }
        Check(vulkanErrors.Count == 0, "no validation errors (" + string.Join("; ", vulkanErrors) + ")");
        ReachLog.SetHandler(null);
        Console.WriteLine(failures == 0 ? "all " + checks + " checks passed" : failures + " of " + checks + " checks FAILED");
        return failures == 0 ? 0 : 1;
    }
}

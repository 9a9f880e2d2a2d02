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
//    its device, whichever is disposed first and also when the finalizers free them.
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

static class ReachTests
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

    // ---------------------------------------------------------------- ABI
    static void StructLayout(string layoutFile)
    {
        var types = typeof(ReachNative).Assembly.GetTypes().ToDictionary(t => t.Name);
        int lines = 0;
        foreach (string line in File.ReadAllLines(layoutFile))
        {
            string[] kv = line.Split(' ');
            long want = long.Parse(kv[1]);
            string[] name = kv[0].Split('.');
            Type t = types[name[0]];
            long got = name.Length == 1 ? Marshal.SizeOf(t) : Marshal.OffsetOf(t, name[1]).ToInt64();
            Check(got == want, "layout: " + kv[0] + " is " + got + " in C#, " + want + " in C");
            lines++;
        }
        Check(lines > 40, "layout: abi_layout printed every struct (" + lines + " lines)");
    }

    // ---------------------------------------------------------------- greedy output
    static void Greedy(Model model)
    {
        string prompt = reference["prompt"];
        int n = reference["n"];
        string refText = reference["text"];
        int[] refIds = ((JsonArray)reference["ids"]).Select(v => (int)v).ToArray();
        int[] refPrompt = ((JsonArray)reference["prompt_ids"]).Select(v => (int)v).ToArray();

        Check(model.Tokenize(prompt).SequenceEqual(refPrompt), "Tokenize gives reach run's prompt ids");
        using (Session s = model.CreateSession(Greedy()))
        {
            var pieces = new List<string>();
            foreach (string piece in s.Generate(prompt, new GenerateOptions { MaxTokens = n })) pieces.Add(piece);
            Check(s.LastTokens.SequenceEqual(refIds),
                  "greedy ids equal reach run's: " + string.Join(" ", s.LastTokens) + " vs " + string.Join(" ", refIds));
            Check(string.Concat(pieces) == refText, "greedy text equals reach run's: '" + string.Concat(pieces) + "'");
            Check(pieces.Count > 1 && pieces.All(p => p.Length > 0), "the text streams in " + pieces.Count + " non-empty pieces");
            Check(model.Detokenize(refIds) == refText, "Detokenize of reach run's ids gives its text");
            Check(s.Position == refPrompt.Length + n - 1, "the session holds the prompt and the decoded tokens (" + s.Position + ")");

            // The same through the callback overload, after a Reset.
            s.Reset();
            int calls = 0;
            string whole = s.GenerateText(prompt, new GenerateOptions { MaxTokens = n }, piece => { calls++; return true; });
            Check(whole == refText && calls == pieces.Count, "GenerateText with a callback gives the same text (" + calls + " calls)");

            // A stop string from the middle of the reference: the reply is the text before it, never any of it.
            s.Reset();
            int cut = refText.Length / 2;
            string stop = refText.Substring(cut, Math.Min(6, refText.Length - cut));
            string before = refText.Substring(0, refText.IndexOf(stop, StringComparison.Ordinal));
            string stopped = s.GenerateText(prompt, new GenerateOptions { MaxTokens = n, Stop = { stop } });
            Check(stopped == before, "stop string '" + stop + "' ends the reply before it: '" + stopped + "'");

            // A callback that returns false stops after its first piece.
            s.Reset();
            string first = s.GenerateText(prompt, new GenerateOptions { MaxTokens = n }, piece => false);
            Check(first.Length > 0 && refText.StartsWith(first, StringComparison.Ordinal) && first.Length < refText.Length,
                  "a callback returning false stops early: '" + first + "'");
            Check(s.LastTokens.Count < n, "stopping early samples fewer tokens (" + s.LastTokens.Count + ")");

            // One step per Poll, never waiting for the GPU: the same reply.
            s.Reset();
            int polls = 0, idle = 0;
            var polled = new StringBuilder();
            using (FrameReply r = s.StartGenerate(prompt, new GenerateOptions { MaxTokens = n }))
            {
                while (!r.Done)
                {
                    string piece = r.Poll();
                    polls++;
                    if (piece.Length == 0) idle++;
                    polled.Append(piece);
                    if (!r.Done) Thread.Sleep(1);
                }
                Check(polled.ToString() == refText && r.Text == refText && s.LastTokens.SequenceEqual(refIds),
                      "StartGenerate + Poll gives reach run's text and ids (" + polls + " polls, " + idle + " found the step running)");
                Check(r.Poll() == "", "Poll after the end returns nothing");
            }
            Check(s.Position == refPrompt.Length + n - 1, "after the polled reply the session holds the prompt and the decoded tokens");

            // A call while a step is in flight is refused; disposing the reply mid-way waits for the step.
            s.Reset();
            using (FrameReply r = s.StartGenerate(prompt, new GenerateOptions { MaxTokens = n }))
            {
                r.Poll();   // samples the first token and submits its decode
                try
                {
                    s.Decode(0);
                    Check(false, "a decode while a step is in flight throws");
                }
                catch (ReachException e)
                {
                    Check(e.Status == ReachStatus.InvalidState, "a decode while a step is in flight throws InvalidState: " + e.Message);
                }
            }
            Check(s.Position == refPrompt.Length + 1, "disposing the reply waited for its step (position " + s.Position + ")");

            // A continuation appends to the sequence: prompt, every sampled token, then the new text.
            s.Reset();
            s.GenerateText(prompt, new GenerateOptions { MaxTokens = 4 });
            int[] firstFour = s.LastTokens.ToArray();
            s.GenerateText(" And", new GenerateOptions { MaxTokens = 2 });
            int expected = refPrompt.Length + 4 + model.Tokenize(" And", false).Length + 2 - 1;
            Check(firstFour.SequenceEqual(refIds.Take(4)) && s.Position == expected,
                  "a second Generate continues the sequence (position " + s.Position + ", expected " + expected + ")");
        }
    }

    // ---------------------------------------------------------------- chat
    static void Chat(Model model)
    {
        var c = (JsonObject)reference["chat"];
        int n = c["n"];
        string refText = c["text"];
        int[] refIds = ((JsonArray)c["ids"]).Select(v => (int)v).ToArray();
        int[] refPrompt = ((JsonArray)c["prompt_ids"]).Select(v => (int)v).ToArray();
        var chat = new List<ChatMessage> { ChatMessage.System(c["system"]), ChatMessage.User(c["user"]) };
        Check(model.ChatTokenize(chat).SequenceEqual(refPrompt), "ChatTokenize gives reach run --chat's prompt ids");
        int[] ends = model.ChatEndTokens();
        Check(ends.Contains(model.Info.EosId), "the chat's end tokens hold the EOS (" + string.Join(" ", ends) + ")");

        using (Session s = model.CreateSession(Greedy()))
        {
            string reply = s.ChatText(chat, new GenerateOptions { MaxTokens = n });
            Check(s.LastTokens.SequenceEqual(refIds) && reply == refText,
                  "greedy chat reply equals reach run --chat's: '" + reply + "'");

            using (Session polled = model.CreateSession(Greedy()))
            using (FrameReply r = polled.StartChat(chat, new GenerateOptions { MaxTokens = n }))
            {
                while (!r.Done) { r.Poll(); Thread.Sleep(1); }
                Check(r.Text == refText && polled.LastTokens.SequenceEqual(refIds), "StartChat + Poll gives the same reply");
            }

            // The next turn keeps what the session holds of the conversation and prefills the rest; the
            // reply is a fresh session's.
            chat.Add(ChatMessage.Assistant(reply));
            chat.Add(ChatMessage.User("How much for a sword?"));
            var options = new GenerateOptions { MaxTokens = 12 };
            string second = s.ChatText(chat, options);
            int[] secondIds = s.LastTokens.ToArray();
            int prompt = model.ChatTokenize(chat).Length;
            Check(s.LastPrefill > 0 && s.LastPrefill < prompt - refPrompt.Length,
                  "the second turn prefills only its new tokens (" + s.LastPrefill + " of " + prompt + ")");
            using (Session fresh = model.CreateSession(Greedy()))
            {
                string again = fresh.ChatText(chat, options);
                Check(fresh.LastPrefill == prompt && again == second && fresh.LastTokens.SequenceEqual(secondIds),
                      "the second turn's reply equals a fresh session's: '" + second + "' vs '" + again + "'");
            }
        }
        try
        {
            model.ChatTokenize(new List<ChatMessage>());
            Check(false, "an empty conversation throws");
        }
        catch (ReachException e)
        {
            Check(e.Status == ReachStatus.InvalidArgument && e.Call == "reach_chat_tokenize",
                  "an empty conversation throws InvalidArgument: " + e.Message);
        }
    }

    // ---------------------------------------------------------------- JSON schema
    const string NpcSchema = @"{""type"": ""object"", ""properties"": {
        ""name"": {""type"": ""string""},
        ""mood"": {""enum"": [""friendly"", ""grumpy"", ""afraid""]},
        ""line"": {""type"": ""string""}},
      ""required"": [""name"", ""mood"", ""line""], ""additionalProperties"": false}";

    static void JsonNpc(Model model)
    {
        using (Session s = model.CreateSession(Greedy()))
        {
            s.SetJsonSchema(NpcSchema);
            var chat = new List<ChatMessage> {
                ChatMessage.System("Reply in JSON."),
                ChatMessage.User("Invent a blacksmith NPC: his name, mood and a short greeting.") };
            string json = s.ChatText(chat, new GenerateOptions { MaxTokens = 160 });
            Console.WriteLine("npc: " + json);
            int last = s.LastTokens[s.LastTokens.Count - 1];
            Check(model.IsEos(last), "the constrained reply ends with an end token once the document is whole");
            JsonObject npc = null;
            try { npc = (JsonObject)JsonValue.Parse(json); }
            catch (Exception e) { Check(false, "the NPC reply parses as a JSON object: " + e.Message); return; }
            Check(npc.Count == 3 && npc.ContainsKey("name") && npc.ContainsKey("mood") && npc.ContainsKey("line"),
                  "the NPC object has exactly name, mood and line");
            Check(npc["name"].JsonType == JsonType.String && npc["line"].JsonType == JsonType.String,
                  "name and line are strings");
            string mood = npc["mood"].JsonType == JsonType.String ? (string)npc["mood"] : "";
            Check(new[] { "friendly", "grumpy", "afraid" }.Contains(mood), "mood is one of the enum: '" + mood + "'");

            // Outside the subset: an exception naming the keyword; the session keeps its constraint.
            try
            {
                s.SetJsonSchema(@"{""type"": ""string"", ""pattern"": ""^a""}");
                Check(false, "a schema with 'pattern' throws");
            }
            catch (ReachException e)
            {
                Check(e.Status == ReachStatus.InvalidArgument && e.NativeMessage.Contains("pattern") &&
                      e.Call == "reach_session_set_json_schema",
                      "a schema with 'pattern' throws InvalidArgument naming it: " + e.Message);
            }
            s.Reset();
            string again = s.ChatText(chat, new GenerateOptions { MaxTokens = 160 });
            Check(again == json, "after the rejected schema the NPC schema still applies");
            s.SetJsonSchema(null);   // removes the constraint
        }
    }

    // ---------------------------------------------------------------- errors
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

    // ---------------------------------------------------------------- devices, loading, text, logits
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

    static void TextAndLogits(Model model)
    {
        const string text = "Grüße aus Köln, 世界! 🙂 naïve café";
        int[] ids = model.Tokenize(text, false);
        Check(ids.Length > 0 && model.Detokenize(ids) == text, "UTF-8 text round-trips through Tokenize / Detokenize");
        int[] refIds = ((JsonArray)reference["ids"]).Select(v => (int)v).ToArray();
        using (Session s = model.CreateSession(Greedy()))
        {
            s.Prefill(model.Tokenize((string)reference["prompt"]));
            float[] logits = s.Logits();
            int argmax = 0;
            for (int i = 1; i < logits.Length; i++) if (logits[i] > logits[argmax]) argmax = i;
            bool eos;
            Check(logits.Length == model.Info.VocabSize && argmax == refIds[0] && s.Sample(out eos) == refIds[0] && !eos,
                  "the logits' argmax is greedy's first token (" + argmax + ")");
        }
    }

    // ---------------------------------------------------------------- lifetimes
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

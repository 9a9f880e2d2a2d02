// Greedy SmolLM2 output through Generate, GenerateText, FrameReply and a stop string against `reach run
// --temp 0`'s ids and text; tokenizing, UTF-8 and the logits.
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
        // The KV cache's type: f16 by default, f32 when asked (the logits then differ by f16's rounding
        // of K and V only, far below their spread), and a value outside reach_kv_type is refused.
        float[] f16 = null, f32 = null;
        foreach (KvCacheType? t in new KvCacheType?[] { null, KvCacheType.F32 })
            using (Session s = model.CreateSession(new SessionOptions { CacheTypeK = t, CacheTypeV = t }))
            {
                s.Prefill(model.Tokenize((string)reference["prompt"]));
                if (t == null) f16 = s.Logits(); else f32 = s.Logits();
            }
        double maxDiff = 0, mean = f32.Average(), spread = 0;
        for (int i = 0; i < f32.Length; i++)
        {
            maxDiff = Math.Max(maxDiff, Math.Abs(f16[i] - f32[i]));
            spread += (f32[i] - mean) * (f32[i] - mean);
        }
        spread = Math.Sqrt(spread / f32.Length);
        Check(maxDiff > 0 && maxDiff < 0.05 * spread,
              "CacheTypeK / V F32 changes the logits by f16's rounding only (max " + maxDiff + ", spread " + spread + ")");
        try
        {
            using (model.CreateSession(new SessionOptions { CacheTypeV = (KvCacheType)7 })) { }
            Check(false, "a cache type outside reach_kv_type throws");
        }
        catch (ReachException e)
        {
            Check(e.Status == ReachStatus.InvalidArgument && e.NativeMessage.Contains("cache_type_v"),
                  "a cache type outside reach_kv_type throws InvalidArgument naming cache_type_v: " + e.NativeMessage);
        }
    }
}

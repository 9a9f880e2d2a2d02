// Text generation on a Session: prompt in, the reply's text out piece by piece, assembled by
// reach_reply_* as `reach run` and `reach serve` assemble it (stop strings end the reply and are never
// shown in part; incomplete UTF-8 characters are held back).
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace Reach
{
    public sealed class GenerateOptions
    {
        /// <summary>Tokens to sample at most (as `reach run -n`; 64).</summary>
        public int MaxTokens = 64;
        /// <summary>Stop strings (at most 16): the reply is the text before the first one.</summary>
        public List<string> Stop = new List<string>();
        /// <summary>Add the tokenizer's special tokens (BOS) to the prompt; null: only when the session is
        /// empty (a first prompt, not a continuation).</summary>
        public bool? AddSpecial;
        /// <summary>Harmony channels (gpt-oss): 0 plain text, 1 channels, -1 as the model's chat template
        /// says; null: 0 for Generate, -1 for Chat.  With channels only the final channel is yielded; the
        /// analysis goes to OnReasoning.</summary>
        public int? Channels;
        /// <summary>The analysis channel's text as it becomes final (channels only).</summary>
        public Action<string> OnReasoning;
    }

    public sealed partial class Session
    {
        // The last token sampled by Generate, not yet appended: the next Generate appends it before its
        // prompt, so the session holds the prompt and every sampled token.  Prefill, Decode, Step,
        // Rewind, Reset and Chat drop it (their caller says what follows).  -1: none.
        int pending = -1;
        readonly List<int> lastTokens = new List<int>();

        /// <summary>Every token the last Generate sampled, the end token included (as `reach run --ids`).</summary>
        public IList<int> LastTokens { get { return lastTokens.AsReadOnly(); } }

        /// <summary>Tokens the last Generate or Chat prefilled (less than its prompt when Chat kept a prefix).</summary>
        public int LastPrefill { get; private set; }

        /// <summary>Appends the prompt and yields the reply's text as it becomes final (pieces may be any
        /// length, none empty).  Stops at an end token, a stop string or MaxTokens; breaking out of the
        /// loop stops too, and frees what the generation holds.  The session keeps the sequence: a later
        /// Generate continues it (Reset starts over).  Failures throw ReachException (ContextOverflow when
        /// the context is full).</summary>
        public IEnumerable<string> Generate(string prompt, GenerateOptions options = null)
        {
            options = options ?? new GenerateOptions();
            if (prompt == null) throw new ArgumentNullException("prompt");
            if (options.MaxTokens < 1) throw new ArgumentOutOfRangeException("options.MaxTokens", "at least 1");
            // Checked before the first MoveNext, so a bad argument throws here rather than mid-loop.
            return Run(prompt, options);
        }

        IEnumerable<string> Run(string prompt, GenerateOptions options)
        {
            foreach (string piece in Stream(PromptIds(prompt, options), options, null, false)) yield return piece;
        }

        // The prompt's ids after the token the last generation left pending.
        int[] PromptIds(string prompt, GenerateOptions options)
        {
            bool addSpecial = options.AddSpecial ?? (Position == 0 && pending < 0);
            int[] ids = Model.Tokenize(ModelRaw, prompt, addSpecial);
            if (pending >= 0)
            {
                var all = new int[ids.Length + 1];
                all[0] = pending;
                Array.Copy(ids, 0, all, 1, ids.Length);
                ids = all;
            }
            if (ids.Length == 0) throw new ArgumentException("the prompt encodes to no tokens", "prompt");
            return ids;
        }

        // Prefills ids, then samples until an end token (is_eos, or one of ends), a stop string or
        // MaxTokens, yielding the reply's text as reach_reply releases it.
        IEnumerable<string> Stream(int[] ids, GenerateOptions options, HashSet<int> ends, bool chat)
        {
            lastTokens.Clear();
            Prefill(ids);
            LastPrefill = ids.Length;
            pending = -1;

            using (ReplyHandle reply = CreateReply(options, chat))
            {
                var text = new ReachReplyText();
                text.Size = (uint)Marshal.SizeOf(typeof(ReachReplyText));
                bool eos;
                int token = Sample(out eos);
                for (int i = 0; ; )
                {
                    lastTokens.Add(token);
                    pending = token;
                    if (eos || (ends != null && ends.Contains(token))) break;
                    ReachException.Check(ReachNative.reach_reply_push(reply.Get("reply"), token, ref text), "reach_reply_push");
                    string piece = Deliver(text, options);
                    if (piece.Length > 0) yield return piece;
                    if (text.Stopped != 0) break;
                    if (++i >= options.MaxTokens) break;
                    token = Step(token, out eos);
                }
                ReachException.Check(ReachNative.reach_reply_finish(reply.Get("reply"), ref text), "reach_reply_finish");
                string tail = Deliver(text, options);
                if (tail.Length > 0) yield return tail;
            }
        }

        /// <summary>Generate's text as one string; onText (may be null) sees each piece as it comes and
        /// returns false to stop early.</summary>
        public string GenerateText(string prompt, GenerateOptions options = null, Func<string, bool> onText = null)
        {
            return Collect(Generate(prompt, options), onText);
        }

        static string Collect(IEnumerable<string> pieces, Func<string, bool> onText)
        {
            var all = new StringBuilder();
            foreach (string piece in pieces)
            {
                all.Append(piece);
                if (onText != null && !onText(piece)) break;
            }
            return all.ToString();
        }

        internal ReplyHandle CreateReply(GenerateOptions options, bool chat)
        {
            if (options.Stop != null && options.Stop.Count > ReachNative.ReplyMaxStop)
                throw new ArgumentException("at most " + ReachNative.ReplyMaxStop + " stop strings", "options.Stop");
            ReachReplyParams p = ReachNative.reach_reply_default_params();
            p.Channels = options.Channels ?? (chat ? ReachNative.ReplyChannelsAuto : 0);
            var h = new ReplyHandle();
            using (var strings = new NativeStrings())
            {
                p.Stop = strings.AddArray(options.Stop);
                p.NStop = new UIntPtr((ulong)(options.Stop == null ? 0 : options.Stop.Count));
                IntPtr raw;
                ReachException.Check(ReachNative.reach_reply_create(ModelRaw, ref p, out raw), "reach_reply_create");
                h.Attach(raw, null);
            }
            return h;
        }

        internal static string Deliver(ReachReplyText text, GenerateOptions options)
        {
            if (options.OnReasoning != null && text.ReasoningLen != UIntPtr.Zero)
                options.OnReasoning(Utf8.FromNative(text.Reasoning, (long)text.ReasoningLen.ToUInt64()));
            return Utf8.FromNative(text.Content, (long)text.ContentLen.ToUInt64());
        }
    }
}

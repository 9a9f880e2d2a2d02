// One generation step per frame without blocking: reach_session_step_async submits a decode and
// reach_session_poll says, without waiting, whether it finished.  A game calls Poll() once per frame
// (Update) and shows what it returns; the frame never waits for the GPU, except for the prompt's
// prefill, which StartGenerate / StartChat run before they return.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Text;

namespace Reach
{
    public sealed class FrameReply : IDisposable
    {
        readonly Session session;
        readonly GenerateOptions options;
        readonly HashSet<int> ends;
        readonly ReplyHandle reply;
        readonly StringBuilder all = new StringBuilder();
        ReachReplyText text;
        int sampled;          // tokens sampled so far
        int inFlight = -1;    // the token whose decode step_async submitted; -1: none
        bool done;

        internal FrameReply(Session s, int[] prompt, GenerateOptions o, HashSet<int> endTokens, bool chat)
        {
            session = s;
            options = o;
            ends = endTokens;
            reply = s.CreateReply(o, chat);
            try
            {
                text.Size = (uint)Marshal.SizeOf(typeof(ReachReplyText));
                s.BeginReply(prompt);
            }
            catch
            {
                reply.Dispose();
                throw;
            }
        }

        /// <summary>true once the reply ended (an end token, a stop string, MaxTokens, or Dispose).</summary>
        public bool Done { get { return done; } }

        /// <summary>The reply's text so far.</summary>
        public string Text { get { return all.ToString(); } }

        /// <summary>Never waits for the GPU: when the step in flight finished, samples its token, submits
        /// the next step and returns the text that became final (often ""); while it runs, returns "".
        /// After the end, returns "" for good.</summary>
        public string Poll()
        {
            if (done) return "";
            IntPtr s = session.Handle.Get("Session");
            if (inFlight >= 0)
            {
                int finished;
                ReachException.Check(ReachNative.reach_session_poll(s, out finished), "reach_session_poll");
                if (finished == 0) return "";
                session.Appended(inFlight);
                inFlight = -1;
            }
            bool eos;
            int token = session.Sample(out eos);
            session.Sampled(token);
            sampled++;
            string piece = "";
            if (eos || (ends != null && ends.Contains(token))) return Finish(piece);
            ReachException.Check(ReachNative.reach_reply_push(reply.Get("reply"), token, ref text), "reach_reply_push");
            piece = Session.Deliver(text, options);
            if (text.Stopped != 0 || sampled >= options.MaxTokens) return Finish(piece);
            ReachException.Check(ReachNative.reach_session_step_async(s, token), "reach_session_step_async");
            inFlight = token;
            all.Append(piece);
            return piece;
        }

        string Finish(string piece)
        {
            done = true;
            ReachException.Check(ReachNative.reach_reply_finish(reply.Get("reply"), ref text), "reach_reply_finish");
            piece += Session.Deliver(text, options);
            reply.Dispose();
            all.Append(piece);
            return piece;
        }

        /// <summary>Ends the reply: waits for a step in flight (so the session can be used again) and frees
        /// what the reply holds.  Harmless twice.</summary>
        public void Dispose()
        {
            done = true;
            if (inFlight >= 0 && !session.Handle.IsClosed)
            {
                int finished;
                ReachNative.reach_session_wait(session.Handle.Get("Session"), ulong.MaxValue, out finished);
                session.Appended(inFlight);
                inFlight = -1;
            }
            reply.Dispose();
        }
    }

    public sealed partial class Session
    {
        /// <summary>Generate's reply, one step per Poll() (see FrameReply).  The prompt's prefill runs
        /// here.  Other calls on the session wait until the reply is Done or disposed.</summary>
        public FrameReply StartGenerate(string prompt, GenerateOptions options = null)
        {
            options = options ?? new GenerateOptions();
            if (prompt == null) throw new ArgumentNullException("prompt");
            if (options.MaxTokens < 1) throw new ArgumentOutOfRangeException("options.MaxTokens", "at least 1");
            return new FrameReply(this, PromptIds(prompt, options), options, null, false);
        }

        /// <summary>Chat's reply, one step per Poll() (see FrameReply).</summary>
        public FrameReply StartChat(IList<ChatMessage> messages, GenerateOptions options = null)
        {
            options = options ?? new GenerateOptions();
            if (options.MaxTokens < 1) throw new ArgumentOutOfRangeException("options.MaxTokens", "at least 1");
            int[] ids = ChatNative.Tokenize(ModelRaw, messages);
            var ends = new HashSet<int>(ChatNative.EndTokens(ModelRaw));
            return new FrameReply(this, Reuse(ids), options, ends, true);
        }

        // FrameReply's bookkeeping, as Stream keeps it.
        internal void BeginReply(int[] ids)
        {
            lastTokens.Clear();
            Prefill(ids);
            LastPrefill = ids.Length;
            pending = -1;
        }
        internal void Sampled(int token) { lastTokens.Add(token); pending = token; }
        internal void Appended(int token) { held.Add(token); pending = -1; }
    }
}

// Conversations through the model's chat template (reach_chat_tokenize, reach_chat_end_tokens): the
// prompt `reach run --chat` builds, and the tokens that end the assistant's turn.
using System;
using System.Collections.Generic;

namespace Reach
{
    /// <summary>One message: role "system", "user" or "assistant", and its text.</summary>
    public struct ChatMessage
    {
        public string Role;
        public string Content;

        public ChatMessage(string role, string content) { Role = role; Content = content; }

        public static ChatMessage System(string content) { return new ChatMessage("system", content); }
        public static ChatMessage User(string content) { return new ChatMessage("user", content); }
        public static ChatMessage Assistant(string content) { return new ChatMessage("assistant", content); }
    }

    internal static class ChatNative
    {
        /// <summary>The conversation's prompt ids.  Throws ReachException: Unsupported for a model whose
        /// template reach does not recognise, InvalidArgument for one the template refuses.</summary>
        public static int[] Tokenize(IntPtr model, IList<ChatMessage> messages)
        {
            if (messages == null) throw new ArgumentNullException("messages");
            var native = new ReachChatMessage[messages.Count];
            using (var strings = new NativeStrings())
            {
                for (int i = 0; i < messages.Count; i++)
                {
                    native[i].Role = strings.Add(messages[i].Role);
                    native[i].Content = strings.Add(messages[i].Content);
                }
                var count = new UIntPtr((ulong)native.Length);
                UIntPtr n;
                ReachException.Check(ReachNative.reach_chat_tokenize(model, native, count, null, UIntPtr.Zero, out n), "reach_chat_tokenize");
                var ids = new int[(long)n.ToUInt64()];
                ReachException.Check(ReachNative.reach_chat_tokenize(model, native, count, ids, n, out n), "reach_chat_tokenize");
                return ids;
            }
        }

        /// <summary>The tokens that end the assistant's turn (end-of-turn and EOS).</summary>
        public static int[] EndTokens(IntPtr model)
        {
            UIntPtr n;
            ReachException.Check(ReachNative.reach_chat_end_tokens(model, null, UIntPtr.Zero, out n), "reach_chat_end_tokens");
            var ids = new int[(long)n.ToUInt64()];
            ReachException.Check(ReachNative.reach_chat_end_tokens(model, ids, n, out n), "reach_chat_end_tokens");
            return ids;
        }
    }

    public sealed partial class Model
    {
        /// <summary>The conversation through the model's chat template with the assistant's turn opened,
        /// as token ids (BOS included).</summary>
        public int[] ChatTokenize(IList<ChatMessage> messages)
        {
            return ChatNative.Tokenize(Handle.Get("Model"), messages);
        }

        /// <summary>The tokens that end the assistant's turn: the template's end-of-turn token and the EOS.</summary>
        public int[] ChatEndTokens()
        {
            return ChatNative.EndTokens(Handle.Get("Model"));
        }
    }

    public sealed partial class Session
    {
        /// <summary>The assistant's reply to the conversation, streamed as Generate streams it; it ends at the
        /// template's end-of-turn token, an EOS, a stop string or MaxTokens.  The session's sequence becomes
        /// the conversation's prompt: what it already holds of it is kept (the conversation so far, when
        /// the last call was a Chat on its first messages) and only the rest is prefilled.  Channels are
        /// those of the template (harmony's analysis goes to OnReasoning) unless options set them.</summary>
        public IEnumerable<string> Chat(IList<ChatMessage> messages, GenerateOptions options = null)
        {
            options = options ?? new GenerateOptions();
            if (options.MaxTokens < 1) throw new ArgumentOutOfRangeException("options.MaxTokens", "at least 1");
            int[] ids = ChatNative.Tokenize(ModelRaw, messages);   // a conversation the template refuses throws here
            var ends = new HashSet<int>(ChatNative.EndTokens(ModelRaw));
            return ChatRun(ids, options, ends);
        }

        IEnumerable<string> ChatRun(int[] ids, GenerateOptions options, HashSet<int> ends)
        {
            foreach (string piece in Stream(Reuse(ids), options, ends, true)) yield return piece;
        }

        /// <summary>Chat's reply as one string; onText as in GenerateText.</summary>
        public string ChatText(IList<ChatMessage> messages, GenerateOptions options = null, Func<string, bool> onText = null)
        {
            return Collect(Chat(messages, options), onText);
        }

        /// <summary>Keeps the longest prefix of ids the session holds (at least one token is left to
        /// prefill, for its logits) and returns the ids still to prefill.</summary>
        int[] Reuse(int[] ids)
        {
            pending = -1;
            int keep = 0;
            while (keep < held.Count && keep < ids.Length && held[keep] == ids[keep]) keep++;
            if (keep == ids.Length) keep--;
            if (keep < 0) keep = 0;
            if (keep < held.Count)
            {
                try { Rewind(keep); }
                catch (ReachException e)
                {
                    // A sliding-window ring overwrote those keys: start over.
                    if (e.Status != ReachStatus.InvalidArgument) throw;
                    Reset();
                    keep = 0;
                }
            }
            var rest = new int[ids.Length - keep];
            Array.Copy(ids, keep, rest, 0, rest.Length);
            return rest;
        }
    }
}

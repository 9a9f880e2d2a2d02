// Chat against `reach run --chat`: prompt ids, the reply, polled, and a second turn that reuses the
// session's tokens against a fresh session's.
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
}

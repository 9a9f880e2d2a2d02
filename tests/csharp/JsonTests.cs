// A JSON-schema NPC reply: it parses, has the schema's fields, its mood one of the enum; a keyword
// outside the subset is refused naming it.
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
}

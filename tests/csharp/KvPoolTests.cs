// KvPool: sessions in one pool generate what sessions with a cache of their own generate, a shared prompt
// is stored once, a full pool throws KvPoolFullException with every session intact and serves again once
// a session is disposed, and a pool disposed before its sessions is freed after them.
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
    // Long enough for whole 16-row blocks that a second session can map.
    const string PoolPrompt = "Once upon a time, in a village at the foot of the mountains, there lived a blacksmith " +
                              "named Brom who forged tools for the farmers and swords for the guards. One day";

    // Prefill, then greedy tokens until n are sampled (past an end token too: only equality matters).
    static List<int> GreedyIds(Session s, int[] ids, int n)
    {
        s.Prefill(ids);
        bool eos;
        var got = new List<int> { s.Sample(out eos) };
        while (got.Count < n) got.Add(s.Step(got[got.Count - 1], out eos));
        return got;
    }

    static List<int> GreedyAlone(Model model, int[] ids, int n)
    {
        using (Session s = model.CreateSession(Greedy())) return GreedyIds(s, ids, n);
    }

    static void KvPools()
    {
        using (Model model = Model.Load(modelDir, Options()))
        {
            PoolShared(model);
            PoolFull(model);
        }
        PoolLifetime();
    }

    static void PoolShared(Model model)
    {
        const int n = 12;
        int[] ids = model.Tokenize(PoolPrompt);
        List<int> want = GreedyAlone(model, ids, n);
        using (KvPool pool = model.CreateKvPool(new KvPoolOptions { Tokens = 512 }))
        {
            KvPoolInfo empty = pool.Info;
            Check(empty.BlockRows == 16 && empty.Blocks == 32 && empty.BlocksUsed == 0 && empty.Sessions == 0 &&
                  empty.Bytes == (ulong)empty.Blocks * (ulong)empty.BlockRows * empty.BytesPerToken && empty.BytesPerToken > 0,
                  "an empty pool of 512 tokens: 32 blocks of 16 rows, " + empty.Bytes + " bytes");
            using (Session a = pool.CreateSession(Greedy()))
            using (Session b = pool.CreateSession(Greedy()))
            {
                Check(a.Pool == pool && a.Model == model, "a pooled session names its pool and model");
                List<int> gotA = GreedyIds(a, ids, n);
                Check(gotA.SequenceEqual(want), "the first pooled session generates what a session of its own does: " +
                      string.Join(" ", gotA) + " vs " + string.Join(" ", want));
                KvPoolInfo one = pool.Info;
                Check(one.PrefixHits == 0 && one.BlocksUsed > 1 && one.Sessions == 2,
                      "the first prompt maps nothing and holds " + one.BlocksUsed + " blocks");
                List<int> gotB = GreedyIds(b, ids, n);
                Check(gotB.SequenceEqual(want), "the second pooled session generates the same: " + string.Join(" ", gotB));
                KvPoolInfo two = pool.Info;
                Check(two.PrefixHits == 1 && two.PrefixHitTokens > 0 && two.PrefixHitTokens < (ulong)ids.Length,
                      "the second prompt maps the first's full blocks (" + two.PrefixHitTokens + " of " + ids.Length + " tokens)");
                Check(two.BlocksUsed < 2 * one.BlocksUsed,
                      "the shared prompt is stored once: " + two.BlocksUsed + " blocks for two sessions, " + one.BlocksUsed + " for one");
            }
            KvPoolInfo after = pool.Info;
            Check(after.Sessions == 0 && after.BlocksUsed == 0 && after.BlocksCached > 0,
                  "disposed sessions give their blocks back, kept cached (" + after.BlocksCached + ")");
        }
    }

    static void PoolFull(Model model)
    {
        int[] first = model.Tokenize("The three primary colors are");
        int[] second = model.Tokenize("Write a short poem about the sea, the wind and the gulls that fly over the harbour at dawn.");
        Check(first.Length + 8 <= 16 && second.Length > 16 && second.Length + 4 <= 32,
              "the prompts fit the test: " + first.Length + " tokens in one block, " + second.Length + " in two");
        const int n = 8;
        List<int> wantFirst = GreedyAlone(model, first, n);
        List<int> wantSecond = GreedyAlone(model, second, 4);
        using (KvPool pool = model.CreateKvPool(new KvPoolOptions { Tokens = 32, BlockRows = 16 }))
        {
            Check(pool.Info.Blocks == 2, "a pool of 32 tokens in blocks of 16 has 2 blocks");
            using (Session a = pool.CreateSession(Greedy()))
            using (Session b = pool.CreateSession(Greedy()))
            {
                a.Prefill(first);
                bool eos;
                var gotFirst = new List<int> { a.Sample(out eos) };
                try
                {
                    b.Prefill(second);
                    Check(false, "a prompt that needs more blocks than are free throws");
                }
                catch (KvPoolFullException e)
                {
                    Check(e.Status == ReachStatus.KvPoolFull && e.Call == "reach_session_prefill" &&
                          e.Message.StartsWith("REACH_ERROR_KV_POOL_FULL: ", StringComparison.Ordinal),
                          "a prompt that needs more blocks than are free throws KvPoolFullException: " + e.Message);
                }
                Check(b.Position == 0 && pool.Info.BlocksUsed == 1, "the refused prompt appended nothing and took no block");

                // The first session goes on as if alone.
                while (gotFirst.Count < n) gotFirst.Add(a.Step(gotFirst[gotFirst.Count - 1], out eos));
                Check(gotFirst.SequenceEqual(wantFirst), "the first session keeps generating what it would alone: " +
                      string.Join(" ", gotFirst));

                // Disposing it (using disposes it again, harmlessly) frees its block for the second prompt.
                a.Dispose();
                Check(pool.Info.BlocksUsed == 0 && pool.Info.Sessions == 1, "disposing the first session gives its block back");
                List<int> gotSecond = GreedyIds(b, second, 4);
                Check(gotSecond.SequenceEqual(wantSecond) && pool.Info.BlocksUsed == 2,
                      "after the first session is disposed the second prompt runs and generates what it would alone: " +
                      string.Join(" ", gotSecond));
            }
        }
    }

    // Disposing the model and the pool before their session frees nothing until the session goes; then
    // session, pool, model and device are freed in that order, each Ok.
    static void PoolLifetime()
    {
        ReachHandle.Released = (kind, status) => { lock (released) released.Add(kind + ":" + status); };
        try
        {
            Model m = Model.Load(modelDir, Options());
            KvPool pool = m.CreateKvPool(new KvPoolOptions { Tokens = 256 });
            Session s = pool.CreateSession(Greedy());
            int[] hello = m.Tokenize("Hello");
            released.Clear();
            m.Dispose();
            pool.Dispose();
            Check(released.Count == 0, "disposing the model and the pool of a live session frees nothing yet");
            try
            {
                s.Prefill(hello);
                Check(s.Position > 0, "the session still runs after its pool and model were disposed");
            }
            catch (Exception e) { Check(false, "the session still runs after its pool and model were disposed: " + e.Message); }
            s.Dispose();
            Check(string.Join(",", released) == "session:Ok,kv_pool:Ok,model:Ok,device:Ok",
                  "session, then pool, then model, then device freed, each Ok: " + string.Join(",", released));
            pool.Dispose();
            Check(released.Count == 4, "disposing the pool twice frees nothing again");

            // The finalizers, in whatever order the GC runs them.  The objects are made on a thread that then
            // ends, so no stale slot of this thread's stack keeps them alive (Mono scans stacks conservatively).
            released.Clear();
            var abandon = new Thread(AbandonPooled);
            abandon.Start();
            abandon.Join();
            for (int i = 0; i < 8 && released.Count < 4; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
            }
            Check(string.Join(",", released) == "session:Ok,kv_pool:Ok,model:Ok,device:Ok",
                  "an unreachable pooled session, its pool, model and device are finalized in that order, each Ok: " +
                  string.Join(",", released));
        }
        finally
        {
            ReachHandle.Released = null;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void AbandonPooled()
    {
        Model m = Model.Load(modelDir, Options());
        Session s = m.CreateKvPool(new KvPoolOptions { Tokens = 64 }).CreateSession(Greedy());
        s.Prefill(m.Tokenize("Hello"));
    }
}

// A sequence on a model (reach_session_*): KV cache, logits, sampler, and the JSON-schema constraint.
// Generation on top of it is in Generate.cs.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    /// <summary>The sampler (reach_sampling_params); null fields keep reach's defaults
    /// (temperature 0.8, top-k 40, top-p 0.95, seed 0).</summary>
    public class SamplingOptions
    {
        /// <summary>0: greedy (argmax).</summary>
        public float? Temperature;
        public int? TopK;
        public float? TopP;
        public ulong? Seed;

        internal ReachSamplingParams Apply(ReachSamplingParams p)
        {
            if (Temperature.HasValue) p.Temperature = Temperature.Value;
            if (TopK.HasValue) p.TopK = TopK.Value;
            if (TopP.HasValue) p.TopP = TopP.Value;
            if (Seed.HasValue) p.Seed = Seed.Value;
            return p;
        }
    }

    /// <summary>reach_session_params; null fields keep reach's defaults (an f16 KV cache among them: README,
    /// "KV cache types").</summary>
    public sealed class SessionOptions : SamplingOptions
    {
        /// <summary>KV-cache capacity in tokens; null: min(max_position_embeddings, 4096).</summary>
        public uint? Context;
        /// <summary>Prefill chunk length (256).</summary>
        public uint? Chunk;
        /// <summary>Position-scheme flags as on `reach run`'s command line ("--rope-scaling yarn --rope-factor 4").</summary>
        public string SchemeFlags;
        /// <summary>Sliding-window layers keep every position (rewind anywhere; more memory).</summary>
        public bool FullKv;
        /// <summary>How the KV cache stores keys and values; null: F16. F32 is exact; Q8_0 / Q4_0 store
        /// blocks of 32 values with an f16 scale.</summary>
        public KvCacheType? CacheTypeK, CacheTypeV;
    }

    public sealed partial class Session : IDisposable
    {
        internal readonly SessionHandle Handle;
        readonly Model model;
        readonly KvPool pool;
        // The tokens the session holds, in order (what Chat may keep of a conversation).
        readonly System.Collections.Generic.List<int> held = new System.Collections.Generic.List<int>();

        Session(SessionHandle h, Model m, KvPool p) { Handle = h; model = m; pool = p; }

        internal static Session Create(Model model, SessionOptions options)
        {
            return Create(model, null, model.Handle, options);
        }

        internal static Session Create(KvPool pool, SessionOptions options)
        {
            return Create(pool.Model, pool, pool.Handle, options);
        }

        // parent is the handle the session is created from and references: the model's, or the pool's
        // (which references the model's), so the model stays loaded while the session lives either way.
        static Session Create(Model model, KvPool pool, ReachHandle parent, SessionOptions options)
        {
            options = options ?? new SessionOptions();
            ReachSessionParams p = ReachNative.reach_session_default_params();
            if (options.Context.HasValue) p.Context = options.Context.Value;
            if (options.Chunk.HasValue) p.Chunk = options.Chunk.Value;
            p.FullKv = options.FullKv ? 1 : 0;
            if (options.CacheTypeK.HasValue) p.CacheTypeK = options.CacheTypeK.Value;
            if (options.CacheTypeV.HasValue) p.CacheTypeV = options.CacheTypeV.Value;
            p.Sampling = options.Apply(p.Sampling);
            var h = new SessionHandle();
            using (var strings = new NativeStrings())
            {
                p.SchemeFlags = strings.Add(options.SchemeFlags);
                ReachHandle.Reference(parent);
                IntPtr raw;
                ReachStatus st;
                string call;
                if (pool == null)
                {
                    call = "reach_session_create";
                    st = ReachNative.reach_session_create(parent.Get("Model"), ref p, out raw);
                }
                else
                {
                    call = "reach_session_create_in_pool";
                    st = ReachNative.reach_session_create_in_pool(parent.Get("KvPool"), ref p, out raw);
                }
                if (st != ReachStatus.Ok) parent.DangerousRelease();
                ReachException.Check(st, call);
                h.Attach(raw, parent);
            }
            return new Session(h, model, pool);
        }

        /// <summary>The model; a session keeps working after Model.Dispose, which frees the model once its
        /// last session is freed.</summary>
        public Model Model { get { return model; } }

        /// <summary>The KV pool the session's cache is in (KvPool.CreateSession), or null for a cache of its
        /// own.  The pool is freed only after its last session, whichever is disposed first.</summary>
        public KvPool Pool { get { return pool; } }

        IntPtr S { get { return Handle.Get("Session"); } }

        // The model's pointer for text calls: live while this session is (it references the model's
        // handle, or the pool's that references it), also after Model.Dispose.
        IntPtr ModelRaw { get { Handle.Get("Session"); return model.Handle.Referenced; } }

        /// <summary>Tokens the session holds.</summary>
        public int Position
        {
            get
            {
                uint pos, cap;
                ReachException.Check(ReachNative.reach_session_position(S, out pos, out cap), "reach_session_position");
                return (int)pos;
            }
        }

        /// <summary>The context capacity in tokens.</summary>
        public int Capacity
        {
            get
            {
                uint pos, cap;
                ReachException.Check(ReachNative.reach_session_position(S, out pos, out cap), "reach_session_position");
                return (int)cap;
            }
        }

        /// <summary>Appends tokens at the current position; the last one's logits become readable.</summary>
        public void Prefill(int[] tokens)
        {
            ReachException.Check(ReachNative.reach_session_prefill(S, tokens, new UIntPtr((ulong)tokens.Length)), "reach_session_prefill");
            held.AddRange(tokens);
            pending = -1;   // the caller chose what follows: a pending sampled token is not appended
        }

        /// <summary>Appends one token with the decode program.</summary>
        public void Decode(int token)
        {
            ReachException.Check(ReachNative.reach_session_decode(S, token), "reach_session_decode");
            held.Add(token);
            pending = -1;
        }

        /// <summary>Samples the next token from the current logits (does not append it).</summary>
        public int Sample(out bool isEos)
        {
            int token, eos;
            ReachException.Check(ReachNative.reach_session_sample(S, out token, out eos), "reach_session_sample");
            isEos = eos != 0;
            return token;
        }

        /// <summary>Decode(token) then Sample(): one generation step.</summary>
        public int Step(int token, out bool isEos)
        {
            int next, eos;
            ReachException.Check(ReachNative.reach_session_step(S, token, out next, out eos), "reach_session_step");
            held.Add(token);
            pending = -1;
            isEos = eos != 0;
            return next;
        }

        /// <summary>The logits of the last appended token (a copy).</summary>
        public float[] Logits()
        {
            IntPtr p;
            UIntPtr n;
            ReachException.Check(ReachNative.reach_session_logits(S, out p, out n), "reach_session_logits");
            var logits = new float[(long)n.ToUInt64()];
            Marshal.Copy(p, logits, 0, logits.Length);
            return logits;
        }

        /// <summary>Replaces the sampler (and reseeds it); null fields take reach's defaults.</summary>
        public void SetSampling(SamplingOptions options)
        {
            ReachSamplingParams p = (options ?? new SamplingOptions()).Apply(ReachNative.reach_sampling_default_params());
            ReachException.Check(ReachNative.reach_session_set_sampling(S, ref p), "reach_session_set_sampling");
        }

        /// <summary>From the next sample on, the tokens spell a JSON document the schema accepts (reach.h
        /// lists the schema subset); null or "" removes the constraint.  A keyword outside the subset
        /// throws ReachException (InvalidArgument, naming it) and keeps the previous constraint.</summary>
        public void SetJsonSchema(string schemaJson)
        {
            ReachException.Check(ReachNative.reach_session_set_json_schema(S, Utf8.Terminated(schemaJson)), "reach_session_set_json_schema");
        }

        /// <summary>Forgets everything after position.</summary>
        public void Rewind(int position)
        {
            if (position < 0) throw new ArgumentOutOfRangeException("position");
            ReachException.Check(ReachNative.reach_session_rewind(S, (uint)position), "reach_session_rewind");
            if (position < held.Count) held.RemoveRange(position, held.Count - position);
            pending = -1;
        }

        /// <summary>An empty sequence (same KV cache and programs).</summary>
        public void Reset()
        {
            ReachException.Check(ReachNative.reach_session_reset(S), "reach_session_reset");
            held.Clear();
            pending = -1;
        }

        /// <summary>Frees the session (waiting for a step in flight); its model can then be freed.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}

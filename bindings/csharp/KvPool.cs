// One paged KV cache that many sessions of a model share (reach_kv_pool_*): memory is reserved once,
// for the pool, and a prompt another session of the pool already computed maps its blocks.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    /// <summary>reach_kv_pool_params; null fields keep reach's defaults.  Give Tokens or Bytes.</summary>
    public sealed class KvPoolOptions
    {
        /// <summary>Positions the pool holds (rounded up to whole blocks).</summary>
        public uint? Tokens;
        /// <summary>Without Tokens: the device bytes the pool may take (the whole blocks that fit).</summary>
        public ulong? Bytes;
        /// <summary>Positions per block, a power of two (null: the device's widest subgroup, 16 to 64).</summary>
        public uint? BlockRows;
        /// <summary>How the pool stores keys and values, for every session in it (SessionOptions'
        /// CacheTypeK / CacheTypeV are not read there); null: F16.</summary>
        public KvCacheType? CacheTypeK, CacheTypeV;
        /// <summary>Also keep each key before rotation, which sessions of ReRoPE, Leaky ReRoPE or
        /// Self-Extend need (one more K per position).</summary>
        public bool RotatedKeys;
    }

    /// <summary>reach_kv_pool_info.</summary>
    public sealed class KvPoolInfo
    {
        /// <summary>Positions per block.</summary>
        public int BlockRows;
        /// <summary>All blocks; held by a live session (a shared block counts once); held by none but
        /// kept for their prefix until needed.</summary>
        public int Blocks, BlocksUsed, BlocksCached;
        /// <summary>Live sessions in the pool.</summary>
        public int Sessions;
        /// <summary>Device bytes of the pool, and of one position (every layer).</summary>
        public ulong Bytes, BytesPerToken;
        /// <summary>Prefills that mapped blocks instead of computing them, and the positions they mapped.</summary>
        public ulong PrefixHits, PrefixHitTokens;
    }

    public sealed class KvPool : IDisposable
    {
        internal readonly KvPoolHandle Handle;
        readonly Model model;

        KvPool(KvPoolHandle h, Model m) { Handle = h; model = m; }

        /// <summary>Allocates the pool on the model's device.  Throws ReachException: OutOfMemory (naming
        /// the size that fits) when the device cannot hold it, InvalidArgument for bad options.</summary>
        public static KvPool Create(Model model, KvPoolOptions options)
        {
            if (model == null) throw new ArgumentNullException("model");
            if (options == null) throw new ArgumentNullException("options");
            ReachKvPoolParams p = ReachNative.reach_kv_pool_default_params();
            if (options.Tokens.HasValue) p.Tokens = options.Tokens.Value;
            if (options.Bytes.HasValue) p.Bytes = options.Bytes.Value;
            if (options.BlockRows.HasValue) p.BlockRows = options.BlockRows.Value;
            if (options.CacheTypeK.HasValue) p.CacheTypeK = options.CacheTypeK.Value;
            if (options.CacheTypeV.HasValue) p.CacheTypeV = options.CacheTypeV.Value;
            p.RotatedKeys = options.RotatedKeys ? 1 : 0;
            var h = new KvPoolHandle();
            ReachHandle.Reference(model.Handle);
            IntPtr raw;
            ReachStatus st = ReachNative.reach_kv_pool_create(model.Handle.Get("Model"), ref p, out raw);
            if (st != ReachStatus.Ok) model.Handle.DangerousRelease();
            ReachException.Check(st, "reach_kv_pool_create");
            h.Attach(raw, model.Handle);
            return new KvPool(h, model);
        }

        /// <summary>The model; the pool keeps working after Model.Dispose, which frees the model once the
        /// pool is freed.</summary>
        public Model Model { get { return model; } }

        public KvPoolInfo Info
        {
            get
            {
                var i = new ReachKvPoolInfo();
                i.Size = (uint)Marshal.SizeOf(typeof(ReachKvPoolInfo));
                ReachException.Check(ReachNative.reach_kv_pool_get_info(Handle.Get("KvPool"), ref i), "reach_kv_pool_get_info");
                return new KvPoolInfo { BlockRows = (int)i.BlockRows, Blocks = (int)i.Blocks, BlocksUsed = (int)i.BlocksUsed,
                                        BlocksCached = (int)i.BlocksCached, Sessions = (int)i.Sessions, Bytes = i.Bytes,
                                        BytesPerToken = i.BytesPerToken, PrefixHits = i.PrefixHits,
                                        PrefixHitTokens = i.PrefixHitTokens };
            }
        }

        /// <summary>A session whose KV cache is this pool's blocks: as Model.CreateSession, except that the
        /// cache types are the pool's and sliding-window layers keep every position.  A step that finds no
        /// block free throws KvPoolFullException.</summary>
        public Session CreateSession(SessionOptions options = null)
        {
            return Session.Create(this, options);
        }

        /// <summary>Frees the pool once its sessions are freed (at once if none is alive).</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}

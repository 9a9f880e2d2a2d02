// A loaded model (reach_model_load): weights on a device, its tokenizer, and the sessions made from it.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    /// <summary>How to load (reach_model_params).</summary>
    public sealed class ModelOptions
    {
        /// <summary>The device to load onto; null: a device of the model's own (DeviceOptions), freed with it.</summary>
        public Device Device;
        /// <summary>For the model's own device (Device null).</summary>
        public DeviceOptions DeviceOptions;
        /// <summary>Quantize a safetensors model's weights at load.</summary>
        public QuantizeType Quantize = QuantizeType.None;
        /// <summary>false: load without tokenizer.json (token ids only).</summary>
        public bool RequireTokenizer = true;
        /// <summary>Load progress in bytes (done, total), on the loading thread; return false to cancel
        /// (ReachException with ReachStatus.Cancelled).</summary>
        public Func<ulong, ulong, bool> Progress;
    }

    /// <summary>reach_model_info.</summary>
    public sealed class ModelInfo
    {
        public int VocabSize, NLayers, HiddenSize, NHeads, NKvHeads, HeadDim;
        public long MaxPositionEmbeddings;
        public ulong NParams, WeightBytes;
        public int BosId, EosId;
        public bool HasTokenizer;
    }

    /// <summary>Unity's IL2CPP compiles a method native code calls only when it carries an attribute of
    /// this name (it matches the name, as UnityEngine's AOT.MonoPInvokeCallbackAttribute).</summary>
    [AttributeUsage(AttributeTargets.Method)]
    internal sealed class MonoPInvokeCallbackAttribute : Attribute
    {
        public MonoPInvokeCallbackAttribute(Type type) { }
    }

    public sealed partial class Model : IDisposable
    {
        internal readonly ModelHandle Handle;
        readonly Device ownDevice;   // created for this model; freed after it

        Model(ModelHandle h, Device own) { Handle = h; ownDevice = own; }

        /// <summary>Loads a Hugging Face style folder (config.json, *.safetensors, tokenizer.json) or a
        /// GGUF file.  Throws ReachException: IO for a missing folder or file, Format for a malformed one,
        /// Unsupported for a family reach does not run.</summary>
        public static Model Load(string dir, ModelOptions options = null)
        {
            if (dir == null) throw new ArgumentNullException("dir");
            options = options ?? new ModelOptions();
            Device own = options.Device == null ? Device.Create(options.DeviceOptions) : null;
            Device device = options.Device ?? own;
            try
            {
                ReachModelParams p = ReachNative.reach_model_default_params();
                p.RequireTokenizer = options.RequireTokenizer ? 1 : 0;
                p.Quantize = (int)options.Quantize;
                GCHandle progress = default(GCHandle);
                if (options.Progress != null)
                {
                    progress = GCHandle.Alloc(options.Progress);
                    p.Progress = Marshal.GetFunctionPointerForDelegate(progressTrampoline);
                    p.ProgressUser = GCHandle.ToIntPtr(progress);
                }
                var h = new ModelHandle();
                ReachHandle.Reference(device.Handle);
                try
                {
                    IntPtr raw;
                    ReachStatus st = ReachNative.reach_model_load(device.Handle.Get("Device"), Utf8.Terminated(dir), ref p, out raw);
                    if (st != ReachStatus.Ok) device.Handle.DangerousRelease();
                    ReachException.Check(st, "reach_model_load");
                    h.Attach(raw, device.Handle);
                }
                finally
                {
                    if (progress.IsAllocated) progress.Free();
                }
                return new Model(h, own);
            }
            catch
            {
                if (own != null) own.Dispose();
                throw;
            }
        }

        // One delegate for every load, kept alive by this field; the user's Func travels in `user`.
        static readonly ReachProgressCallback progressTrampoline = OnProgress;

        [MonoPInvokeCallback(typeof(ReachProgressCallback))]
        static int OnProgress(IntPtr user, ulong done, ulong total)
        {
            try
            {
                var f = (Func<ulong, ulong, bool>)GCHandle.FromIntPtr(user).Target;
                return f(done, total) ? 1 : 0;
            }
            catch
            {
                return 0;   // an exception must not unwind through native frames: cancel the load
            }
        }

        public ModelInfo Info
        {
            get
            {
                var i = new ReachModelInfo();
                i.Size = (uint)Marshal.SizeOf(typeof(ReachModelInfo));
                ReachException.Check(ReachNative.reach_model_get_info(Handle.Get("Model"), ref i), "reach_model_get_info");
                return new ModelInfo { VocabSize = i.VocabSize, NLayers = i.NLayers, HiddenSize = i.HiddenSize,
                                       NHeads = i.NHeads, NKvHeads = i.NKvHeads, HeadDim = i.HeadDim,
                                       MaxPositionEmbeddings = i.MaxPositionEmbeddings, NParams = i.NParams,
                                       WeightBytes = i.WeightBytes, BosId = i.BosId, EosId = i.EosId,
                                       HasTokenizer = i.HasTokenizer != 0 };
            }
        }

        /// <summary>Text to token ids; addSpecial adds what the tokenizer's post-processor adds (BOS).</summary>
        public int[] Tokenize(string text, bool addSpecial = true)
        {
            return Tokenize(Handle.Get("Model"), text, addSpecial);
        }

        internal static int[] Tokenize(IntPtr m, string text, bool addSpecial)
        {
            byte[] bytes = Utf8.Terminated(text ?? "");
            var len = new UIntPtr((ulong)(bytes.Length - 1));
            UIntPtr n;
            ReachException.Check(ReachNative.reach_tokenize(m, bytes, len, addSpecial ? 1 : 0, null, UIntPtr.Zero, out n), "reach_tokenize");
            var ids = new int[(long)n.ToUInt64()];
            ReachException.Check(ReachNative.reach_tokenize(m, bytes, len, addSpecial ? 1 : 0, ids, n, out n), "reach_tokenize");
            return ids;
        }

        /// <summary>Token ids to text; skipSpecial drops BOS, EOS and the other special tokens.</summary>
        public string Detokenize(int[] tokens, bool skipSpecial = true)
        {
            IntPtr m = Handle.Get("Model");
            var n = new UIntPtr((ulong)tokens.Length);
            UIntPtr len;
            ReachException.Check(ReachNative.reach_detokenize(m, tokens, n, skipSpecial ? 1 : 0, null, UIntPtr.Zero, out len), "reach_detokenize");
            var text = new byte[len.ToUInt64() + 1];
            ReachException.Check(ReachNative.reach_detokenize(m, tokens, n, skipSpecial ? 1 : 0, text, new UIntPtr((ulong)text.Length), out len), "reach_detokenize");
            return System.Text.Encoding.UTF8.GetString(text, 0, (int)len.ToUInt64());
        }

        /// <summary>true when token ends a sequence for this model.</summary>
        public bool IsEos(int token)
        {
            int eos;
            ReachException.Check(ReachNative.reach_model_is_eos(Handle.Get("Model"), token, out eos), "reach_model_is_eos");
            return eos != 0;
        }

        /// <summary>A sequence on this model (KV cache, sampler); see SessionOptions.</summary>
        public Session CreateSession(SessionOptions options = null)
        {
            return Session.Create(this, options);
        }

        /// <summary>A KV cache that sessions of this model share (KvPool.CreateSession); see KvPoolOptions.</summary>
        public KvPool CreateKvPool(KvPoolOptions options)
        {
            return KvPool.Create(this, options);
        }

        /// <summary>Frees the model once its sessions and KV pools are freed (at once if none is alive), then
        /// the device it created for itself.</summary>
        public void Dispose()
        {
            Handle.Dispose();
            if (ownDevice != null) ownDevice.Dispose();
        }
    }
}

// P/Invoke declarations of include/reach.h, one to one: the functions, enums and params structs as the
// header declares them (64-bit layout).  The idiomatic layer (Device, Model, Session) is built on these;
// they are public for what it does not wrap (an adopted host device, batching, host-submitted decodes).
//
// Strings cross as UTF-8 bytes (byte[] ending in a NUL, or IntPtr), never through the marshaller's
// string conversion, which is the ANSI code page on Windows' .NET Framework and Unity's Mono.
// The params structs hold no arrays, only fixed fields (reserved words included), so they are blittable:
// they return by value from *_default_params as the C ABI returns them, and no `unsafe` is needed.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    /// <summary>How the KV cache stores keys or values (reach_kv_type; README, "KV cache types").</summary>
    public enum KvCacheType : int
    {
        F32 = 0,
        F16 = 1,
        Q8_0 = 2,
        Q4_0 = 3,
    }

    /// <summary>reach_status: the code every reach call returns.</summary>
    public enum ReachStatus
    {
        Ok = 0,
        InvalidArgument = 1,
        InvalidState = 2,
        Vulkan = 3,
        OutOfMemory = 4,
        IO = 5,
        Format = 6,
        Unsupported = 7,
        ContextOverflow = 8,
        Cancelled = 9,
        BufferTooSmall = 10,
        Internal = 11,
        DeviceLost = 12,
        /// <summary>A KV pool has no block free for the step: nothing ran, every session of the pool is as
        /// it was.  Retry once another session is freed or rewinds.</summary>
        KvPoolFull = 13,
    }

    /// <summary>reach_quantize_type: what a safetensors model's weights are quantized to at load.</summary>
    public enum QuantizeType
    {
        None = 0,
        Q8_0 = 1,
        Q4_0 = 2,
        Q4_K = 3,
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void ReachLogCallback(IntPtr user, int level, IntPtr message);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate int ReachProgressCallback(IntPtr user, ulong done, ulong total);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void ReachQueueLockCallback(IntPtr user, int locked);

    /// <summary>reach_device_info (an output: set Size = Marshal.SizeOf before the call).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachDeviceInfo
    {
        public uint Size;
        public uint Index;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 256)] public byte[] Name;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 256)] public byte[] Driver;
        public int Type;
        public uint VendorId, DeviceId;
        public uint ApiVersion;
        public ulong VramBytes;
        public int Fp16Storage;
        public int Fp16Arithmetic;
        public uint SubgroupSize;
        public int SubgroupArithmetic;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12, _r13, _r14, _r15;
    }

    /// <summary>reach_device_params; take it from reach_device_default_params().  The reserved words are
    /// (56 - pointer size) / 4 in the header: 12 on the 64-bit targets this binding is for.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachDeviceParams
    {
        public uint Size;
        public int Index;
        public IntPtr Name;               // const char* (UTF-8) or zero
        public int LowPriority;
        public int Validation;
        public IntPtr PipelineCacheDir;   // const char* or zero
        public int UseEnvironment;
        uint _reserved0;
        public IntPtr DeviceProfile;      // const char* or zero
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11;
    }

    /// <summary>reach_adopt_params; take it from reach_adopt_default_params().</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachAdoptParams
    {
        public uint Size;
        public IntPtr Instance;
        public IntPtr PhysicalDevice;
        public IntPtr Device;
        public uint QueueFamily;
        public IntPtr Queue;
        public IntPtr QueueLock;          // a ReachQueueLockCallback through Marshal.GetFunctionPointerForDelegate
        public IntPtr QueueLockUser;
        public int Storage16BitEnabled;
        public int Fp16ArithmeticEnabled;
        public int SubgroupSizeControlEnabled;
        public IntPtr PipelineCacheDir;
        public int DebugUtilsEnabled;
        public int CooperativeMatrixEnabled;
        public int UseEnvironment;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12;
        public IntPtr GetInstanceProcAddr;
    }

    /// <summary>reach_model_params; take it from reach_model_default_params().</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachModelParams
    {
        public uint Size;
        public IntPtr Progress;           // a ReachProgressCallback or zero
        public IntPtr ProgressUser;
        public int RequireTokenizer;
        public int Quantize;              // QuantizeType
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12, _r13, _r14;
    }

    /// <summary>reach_model_info (an output: set Size before the call).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachModelInfo
    {
        public uint Size;
        public int VocabSize;
        public int NLayers;
        public int HiddenSize;
        public int NHeads, NKvHeads, HeadDim;
        public long MaxPositionEmbeddings;
        public ulong NParams;
        public ulong WeightBytes;
        public int BosId;
        public int EosId;
        public int HasTokenizer;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12, _r13, _r14, _r15;
    }

    /// <summary>reach_reply_params; take it from reach_reply_default_params().</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachReplyParams
    {
        public uint Size;
        public IntPtr Stop;               // const char* const*: NStop pointers to UTF-8 strings
        public UIntPtr NStop;
        public int Channels;              // 0 plain, 1 harmony, -1 as the chat template says
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12, _r13, _r14, _r15;
    }

    /// <summary>reach_reply_text (an output: set Size before the call).  The texts are UTF-8, valid until
    /// the next call on the reply.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachReplyText
    {
        public uint Size;
        public IntPtr Content;
        public UIntPtr ContentLen;
        public IntPtr Reasoning;
        public UIntPtr ReasoningLen;
        public int Stopped;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7;
    }

    /// <summary>reach_chat_message: role and content, each a UTF-8 const char*.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachChatMessage
    {
        public IntPtr Role;
        public IntPtr Content;
    }

    /// <summary>reach_sampling_params; take it from reach_sampling_default_params().</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachSamplingParams
    {
        public uint Size;
        public float Temperature;
        public int TopK;
        public float TopP;
        public ulong Seed;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7;
    }

    /// <summary>reach_session_params; take it from reach_session_default_params().  Strings are
    /// const char* (UTF-8) or zero; integers -1 and reals 0 mean "not set" (the header's rules).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachSessionParams
    {
        public uint Size;
        public uint Context;
        public uint Chunk;
        public long LTest;
        public IntPtr RopeScaling;
        public double RopeFactor;
        public long OriginalCtx;
        public long ReropeWindow;
        public double LeakyK;
        public long SelfExtendGroup;
        public long SelfExtendWindow;
        public long Logn;
        public IntPtr QkNorm;
        public double CosN;
        public long AttnWindow;
        public long AttnSinks;
        public IntPtr SchemeFlags;
        public ReachSamplingParams Sampling;
        public int Profile;
        public int FullKv;
        public KvCacheType CacheTypeK, CacheTypeV;
        uint _r2, _r3, _r4, _r5, _r6, _r7, _r8, _r9, _r10, _r11, _r12, _r13, _r14;
    }

    /// <summary>reach_kv_pool_params; take it from reach_kv_pool_default_params().</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachKvPoolParams
    {
        public uint Size;
        public uint Tokens;               // positions; 0: Bytes says
        public ulong Bytes;
        public uint BlockRows;            // a power of two; 0 = the device's widest subgroup, 16 to 64
        public KvCacheType CacheTypeK, CacheTypeV;
        public int RotatedKeys;
        uint _r0, _r1, _r2, _r3, _r4, _r5, _r6, _r7;
    }

    /// <summary>reach_kv_pool_info (an output: set Size before the call).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ReachKvPoolInfo
    {
        public uint Size;
        public uint BlockRows;
        public uint Blocks;
        public uint BlocksUsed;
        public uint BlocksCached;
        public uint Sessions;
        public ulong Bytes;
        public ulong BytesPerToken;
        public ulong PrefixHits;
        public ulong PrefixHitTokens;
    }

    /// <summary>The functions of reach.h.  Handles are IntPtr here; Device, Model, KvPool and Session hold
    /// them in SafeHandles.</summary>
    public static class ReachNative
    {
        /// <summary>The DllImport name: the shared library as the build names it on each platform
        /// (libreach.so, libreach.dylib, libreach.dll).</summary>
        public const string Library = "libreach";

        public const int ReplyMaxStop = 16;
        public const int ReplyChannelsAuto = -1;
        public const int BatchMax = 64;

        // ---- status
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern IntPtr reach_status_name(ReachStatus status);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern IntPtr reach_last_error();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern IntPtr reach_version();

        // ---- logging
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern void reach_set_log_callback(ReachLogCallback callback, IntPtr user);

        // ---- devices
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_count(out uint count);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_get_info(uint index, ref ReachDeviceInfo info);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachDeviceParams reach_device_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_create(ref ReachDeviceParams parameters, out IntPtr device);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachAdoptParams reach_adopt_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_adopt(ref ReachAdoptParams parameters, out IntPtr device);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_describe(IntPtr device, ref ReachDeviceInfo info);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_device_free(IntPtr device);

        // ---- models
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachModelParams reach_model_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_model_load(IntPtr device, byte[] dirUtf8, ref ReachModelParams parameters, out IntPtr model);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_model_get_info(IntPtr model, ref ReachModelInfo info);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_model_is_eos(IntPtr model, int token, out int isEos);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_model_free(IntPtr model);

        // ---- text
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_tokenize(IntPtr model, byte[] text, UIntPtr textLen, int addSpecial, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_detokenize(IntPtr model, int[] tokens, UIntPtr nTokens, int skipSpecial, [Out] byte[] text, UIntPtr capacity, out UIntPtr length);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_stream_create(IntPtr model, int skipSpecial, out IntPtr stream);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_stream_push(IntPtr stream, int token, out IntPtr text, out UIntPtr length);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_stream_flush(IntPtr stream, out IntPtr text, out UIntPtr length);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_stream_free(IntPtr stream);

        // ---- chat
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_chat_tokenize(IntPtr model, ReachChatMessage[] messages, UIntPtr nMessages, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_chat_end_tokens(IntPtr model, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);

        // ---- replies
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachReplyParams reach_reply_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_reply_create(IntPtr model, ref ReachReplyParams parameters, out IntPtr reply);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_reply_push(IntPtr reply, int token, ref ReachReplyText text);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_reply_finish(IntPtr reply, ref ReachReplyText text);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_reply_reset(IntPtr reply);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_reply_free(IntPtr reply);

        // ---- sessions
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachSamplingParams reach_sampling_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachSessionParams reach_session_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_create(IntPtr model, ref ReachSessionParams parameters, out IntPtr session);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_free(IntPtr session);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_prefill(IntPtr session, int[] tokens, UIntPtr n);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_decode(IntPtr session, int token);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_sample(IntPtr session, out int token, out int isEos);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_step(IntPtr session, int token, out int next, out int isEos);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_batch_decode(IntPtr[] sessions, int[] tokens, UIntPtr n);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_set_sampling(IntPtr session, ref ReachSamplingParams parameters);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_logits(IntPtr session, out IntPtr logits, out UIntPtr count);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_position(IntPtr session, out uint position, out uint capacity);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_rewind(IntPtr session, uint position);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_reset(IntPtr session);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_set_json_schema(IntPtr session, byte[] schemaUtf8);

        // ---- KV pool
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachKvPoolParams reach_kv_pool_default_params();
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_kv_pool_create(IntPtr model, ref ReachKvPoolParams parameters, out IntPtr pool);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_kv_pool_free(IntPtr pool);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_kv_pool_get_info(IntPtr pool, ref ReachKvPoolInfo info);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_create_in_pool(IntPtr pool, ref ReachSessionParams parameters, out IntPtr session);

        // ---- frame budget
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_step_async(IntPtr session, int token);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_poll(IntPtr session, out int done);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_wait(IntPtr session, ulong timeoutNs, out int done);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_fence(IntPtr session, out ulong vkFence);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_record_decode(IntPtr session, IntPtr vkCommandBuffer);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_begin_decode(IntPtr session, int token);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_end_decode(IntPtr session);
        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)] public static extern ReachStatus reach_session_release_recording(IntPtr session, IntPtr vkCommandBuffer);
    }
}

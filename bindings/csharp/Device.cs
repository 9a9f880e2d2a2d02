// A Vulkan device reach owns (reach_device_create).  Several models may share one; a Model loaded
// without one creates its own.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    /// <summary>Which device and how (reach_device_params).  Unset fields keep reach's defaults.</summary>
    public sealed class DeviceOptions
    {
        /// <summary>Loader order; null: the best type (discrete > integrated > ... > CPU).</summary>
        public int? Index;
        /// <summary>A case-insensitive substring of the device name; overrides Index.</summary>
        public string Name;
        /// <summary>The lowest queue priority: share the GPU with the game's renderer.</summary>
        public bool LowPriority;
        /// <summary>The Khronos validation layer, its messages to the log.</summary>
        public bool Validation;
        /// <summary>Pipeline cache folder; null: none (or REACH_CACHE_DIR with UseEnvironment); "-": none.</summary>
        public string PipelineCacheDir;
        /// <summary>Read the REACH_* environment variables as the reach CLI does (off by default: a game is
        /// not changed by variables it did not opt into).</summary>
        public bool UseEnvironment;
    }

    /// <summary>reach_device_info, decoded.</summary>
    public sealed class DeviceInfo
    {
        public int Index;
        public string Name;
        public string Driver;
        public int Type;         // VkPhysicalDeviceType: 1 integrated, 2 discrete, 4 CPU
        public ulong VramBytes;
        public uint SubgroupSize;

        internal static DeviceInfo From(ReachDeviceInfo i)
        {
            return new DeviceInfo { Index = (int)i.Index, Name = Utf8.FromFixed(i.Name), Driver = Utf8.FromFixed(i.Driver),
                                    Type = i.Type, VramBytes = i.VramBytes, SubgroupSize = i.SubgroupSize };
        }

        internal static ReachDeviceInfo Empty()
        {
            var i = new ReachDeviceInfo { Name = new byte[256], Driver = new byte[256] };
            i.Size = (uint)Marshal.SizeOf(typeof(ReachDeviceInfo));
            return i;
        }
    }

    public sealed class Device : IDisposable
    {
        internal readonly DeviceHandle Handle;

        Device(DeviceHandle h) { Handle = h; }

        /// <summary>reach_device_create.  Throws ReachException (Unsupported without a Vulkan loader,
        /// InvalidArgument for a bad index or a name no device has).</summary>
        public static Device Create(DeviceOptions options = null)
        {
            options = options ?? new DeviceOptions();
            ReachDeviceParams p = ReachNative.reach_device_default_params();
            if (options.Index.HasValue) p.Index = options.Index.Value;
            p.LowPriority = options.LowPriority ? 1 : 0;
            p.Validation = options.Validation ? 1 : 0;
            p.UseEnvironment = options.UseEnvironment ? 1 : 0;
            var h = new DeviceHandle();
            using (var strings = new NativeStrings())
            {
                p.Name = strings.Add(options.Name);
                p.PipelineCacheDir = strings.Add(options.PipelineCacheDir);
                IntPtr raw;
                ReachException.Check(ReachNative.reach_device_create(ref p, out raw), "reach_device_create");
                h.Attach(raw, null);
            }
            return new Device(h);
        }

        /// <summary>The Vulkan devices the loader reports, without creating one.</summary>
        public static DeviceInfo[] List()
        {
            uint n;
            ReachException.Check(ReachNative.reach_device_count(out n), "reach_device_count");
            var all = new DeviceInfo[n];
            for (uint i = 0; i < n; i++)
            {
                ReachDeviceInfo info = DeviceInfo.Empty();
                ReachException.Check(ReachNative.reach_device_get_info(i, ref info), "reach_device_get_info");
                all[i] = DeviceInfo.From(info);
            }
            return all;
        }

        /// <summary>The chosen device.</summary>
        public DeviceInfo Info
        {
            get
            {
                ReachDeviceInfo info = DeviceInfo.Empty();
                ReachException.Check(ReachNative.reach_device_describe(Handle.Get("Device"), ref info), "reach_device_describe");
                return DeviceInfo.From(info);
            }
        }

        /// <summary>Frees the device once its models are freed (at once if none is alive).</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}

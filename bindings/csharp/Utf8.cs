// UTF-8 both ways across the C API: reach takes and returns UTF-8 only.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Reach
{
    internal static class Utf8
    {
        /// <summary>NUL-terminated UTF-8 bytes of s, for a const char* parameter; null stays null.</summary>
        public static byte[] Terminated(string s)
        {
            if (s == null) return null;
            int n = Encoding.UTF8.GetByteCount(s);
            var bytes = new byte[n + 1];
            Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        /// <summary>A NUL-terminated UTF-8 string reach owns; zero gives "".</summary>
        public static string FromNative(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            return FromNative(p, n);
        }

        /// <summary>length bytes of UTF-8 at p (reach's pointer + length pairs).</summary>
        public static string FromNative(IntPtr p, long length)
        {
            if (p == IntPtr.Zero || length == 0) return "";
            var bytes = new byte[length];
            Marshal.Copy(p, bytes, 0, (int)length);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>The text before the first NUL of a fixed char array (reach_device_info.name).</summary>
        public static string FromFixed(byte[] bytes)
        {
            if (bytes == null) return "";
            int n = Array.IndexOf(bytes, (byte)0);
            return Encoding.UTF8.GetString(bytes, 0, n < 0 ? bytes.Length : n);
        }
    }

    /// <summary>Unmanaged NUL-terminated UTF-8 copies of strings, for the const char* fields of params
    /// structs; freed together on Dispose (after the call that reads them).</summary>
    internal sealed class NativeStrings : IDisposable
    {
        readonly System.Collections.Generic.List<IntPtr> owned = new System.Collections.Generic.List<IntPtr>();

        /// <summary>A pointer valid until Dispose; null gives zero (the field's "not set").</summary>
        public IntPtr Add(string s)
        {
            if (s == null) return IntPtr.Zero;
            byte[] bytes = Utf8.Terminated(s);
            IntPtr p = Marshal.AllocHGlobal(bytes.Length);
            owned.Add(p);
            Marshal.Copy(bytes, 0, p, bytes.Length);
            return p;
        }

        /// <summary>A const char* const* array of the strings, valid until Dispose.</summary>
        public IntPtr AddArray(System.Collections.Generic.IList<string> strings)
        {
            if (strings == null || strings.Count == 0) return IntPtr.Zero;
            IntPtr array = Marshal.AllocHGlobal(IntPtr.Size * strings.Count);
            owned.Add(array);
            for (int i = 0; i < strings.Count; i++) Marshal.WriteIntPtr(array, i * IntPtr.Size, Add(strings[i]));
            return array;
        }

        public void Dispose()
        {
            foreach (IntPtr p in owned) Marshal.FreeHGlobal(p);
            owned.Clear();
        }
    }
}

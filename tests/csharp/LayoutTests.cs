// The binding's struct declarations against the C compiler's layout (abi_layout.c prints it).
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
    static void StructLayout(string layoutFile)
    {
        var types = typeof(ReachNative).Assembly.GetTypes().ToDictionary(t => t.Name);
        int lines = 0;
        var structs = new HashSet<string>();
        foreach (string line in File.ReadAllLines(layoutFile))
        {
            string[] kv = line.Split(' ');
            structs.Add(kv[0].Split('.')[0]);
            long want = long.Parse(kv[1]);
            string[] name = kv[0].Split('.');
            Type t = types[name[0]];
            long got = name.Length == 1 ? Marshal.SizeOf(t) : Marshal.OffsetOf(t, name[1]).ToInt64();
            Check(got == want, "layout: " + kv[0] + " is " + got + " in C#, " + want + " in C");
            lines++;
        }
        Check(lines > 55, "layout: abi_layout printed every struct (" + lines + " lines)");
        Check(structs.Contains("ReachKvPoolParams") && structs.Contains("ReachKvPoolInfo"),
              "layout: the KV pool's structs are compared too");
    }
}

// SafeHandles of reach's objects.  reach frees a parent (device -> model -> KV pool -> session) only
// once its children are gone (else *_free fails with INVALID_STATE and frees nothing), while .NET
// finalizes unreachable objects in any order.  So a child handle holds a reference on its parent's
// SafeHandle (DangerousAddRef) until its own *_free has run: disposing a Model before its Sessions only
// marks the model closed, and reach_model_free runs after the last session's reach_session_free,
// whatever the order of Dispose calls or finalizers.  SafeHandle.Dispose is idempotent: disposing twice
// is harmless.
using System;
using System.Runtime.InteropServices;

namespace Reach
{
    internal abstract class ReachHandle : SafeHandle
    {
        SafeHandle parent;   // referenced (DangerousAddRef) from Attach until ReleaseHandle

        protected ReachHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        /// <summary>Takes the pointer a *_create returned; parent (may be null) stays referenced until
        /// this handle is freed.  The caller took the reference already (Reference) before the create.</summary>
        internal void Attach(IntPtr raw, SafeHandle referencedParent)
        {
            parent = referencedParent;
            SetHandle(raw);
        }

        /// <summary>A reference on h for a child about to be created; undone with Unreference when the
        /// create fails.  Throws ObjectDisposedException when h is already disposed.</summary>
        internal static void Reference(SafeHandle h)
        {
            bool added = false;
            h.DangerousAddRef(ref added);
            if (!added) throw new ObjectDisposedException(h.GetType().Name);
        }

        /// <summary>The raw pointer for a call; ObjectDisposedException once disposed, never a freed
        /// pointer.</summary>
        internal IntPtr Get(string what)
        {
            if (IsClosed || IsInvalid) throw new ObjectDisposedException(what);
            return handle;
        }

        /// <summary>The raw pointer of a parent for a child that holds a reference on it (Reference): valid
        /// after the parent's Dispose, as reach frees the parent only after the child.</summary>
        internal IntPtr Referenced { get { return handle; } }

        protected abstract ReachStatus Free(IntPtr raw);

        /// <summary>Called after each *_free with the handle's kind ("session") and the status it returned:
        /// lets the tests see the order and outcome of releases, finalizers included.</summary>
        internal static Action<string, ReachStatus> Released;

        protected abstract string Kind { get; }

        protected override bool ReleaseHandle()
        {
            // Runs once, when the last reference is gone (children released theirs first).
            ReachStatus st = Free(handle);
            handle = IntPtr.Zero;
            Action<string, ReachStatus> hook = Released;
            if (hook != null) hook(Kind, st);
            if (parent != null) parent.DangerousRelease();
            parent = null;
            return st == ReachStatus.Ok;
        }
    }

    internal sealed class DeviceHandle : ReachHandle
    {
        protected override string Kind { get { return "device"; } }
        protected override ReachStatus Free(IntPtr raw) { return ReachNative.reach_device_free(raw); }
    }

    internal sealed class ModelHandle : ReachHandle
    {
        protected override string Kind { get { return "model"; } }
        protected override ReachStatus Free(IntPtr raw) { return ReachNative.reach_model_free(raw); }
    }

    /// <summary>References its model's handle; a session in the pool references this one, so
    /// reach_kv_pool_free (INVALID_STATE while sessions use the pool) runs after the last of them.</summary>
    internal sealed class KvPoolHandle : ReachHandle
    {
        protected override string Kind { get { return "kv_pool"; } }
        protected override ReachStatus Free(IntPtr raw) { return ReachNative.reach_kv_pool_free(raw); }
    }

    internal sealed class SessionHandle : ReachHandle
    {
        protected override string Kind { get { return "session"; } }
        protected override ReachStatus Free(IntPtr raw) { return ReachNative.reach_session_free(raw); }
    }

    /// <summary>A reply may outlive its model (reach.h), so it references no parent.</summary>
    internal sealed class ReplyHandle : ReachHandle
    {
        protected override string Kind { get { return "reply"; } }
        protected override ReachStatus Free(IntPtr raw) { return ReachNative.reach_reply_free(raw); }
    }
}

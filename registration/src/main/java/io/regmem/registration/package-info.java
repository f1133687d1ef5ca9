/**
 * Registration and the verbs object model: {@link io.regmem.registration.RdmaDevice} (opened by
 * provider name), {@link io.regmem.registration.ProtectionDomain},
 * {@link io.regmem.registration.MemoryRegion} with its keys and {@link io.regmem.registration.Access}
 * rights, {@link io.regmem.registration.CompletionQueue}, {@link io.regmem.registration.CmId} and
 * {@link io.regmem.registration.QueuePair}, and the per-device registry of live objects
 * ({@link io.regmem.registration.ResourceTracker}).
 *
 * <p>Ownership follows kernel-semantics section 1: every object knows its parent; a parent with
 * live children refuses to be destroyed ({@code EBUSY}) and stays usable; a failed call changes no
 * count. Creation and destruction are serialized per device under one lock: they are slow paths.
 *
 * <h2>Memory-access vocabulary and padding (this module)</h2>
 * Comments and code name memory accesses by {@link java.lang.invoke.VarHandle}'s modes, and only
 * by them: <b>plain</b> (no ordering), <b>opaque</b> (no tearing, eventually seen; for hints and
 * counters), <b>release</b> / <b>acquire</b> (a store that publishes everything before it / a load
 * that sees everything before the release it reads: queue tails and heads, published indexes),
 * <b>volatile</b> (sequentially consistent: states, flags that pair with a second variable, as in
 * {@code spi.GracePeriod}), and compare-and-set / get-and-add for read-modify-write. "Publish" means
 * a release store (or a volatile one) of a reference to an object not changed afterwards.
 * Fields written by different threads on a hot path are separated by <b>128 bytes</b> of padding
 * (16 longs, in superclasses laid out before subclass fields, as JCTools does): two cache lines,
 * since x86's adjacent-line prefetcher pulls lines in pairs. {@code cache.RegionRefs},
 * {@code rpc.SendCtxRing} and {@code spi.GracePeriod.Reader} use that one width.
 */
package io.regmem.registration;

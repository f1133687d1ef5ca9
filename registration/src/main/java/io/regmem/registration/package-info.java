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
 */
package io.regmem.registration;

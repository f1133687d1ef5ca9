/**
 * The same-host lane and the {@code shm} provider, {@code RdmaDevice.open("shm")}. Per connection,
 * a sealed {@code memfd} ({@link io.regmem.registration.shm.SharedFile}) passed over a Unix domain
 * socket ({@link io.regmem.registration.shm.UnixSocket}) holds four single-producer rings
 * ({@link io.regmem.registration.shm.Ring}): each side's requests and each side's answers. The target
 * checks every request against its own key tables in its grace-period section; each side places bytes
 * only into its own memory: small ones through the ring, large WRITEs and SENDs with one
 * {@code process_vm_readv} by the target from the initiator's memory, large READs with one by the
 * initiator from the range the target granted ({@link io.regmem.registration.shm.Grants}). Registered
 * memory is never mapped into a peer. The peer process is watched through a pidfd ({@link io.regmem.registration.shm.PeerProcess}).
 */
package io.regmem.registration.shm;

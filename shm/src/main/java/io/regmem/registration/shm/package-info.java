/**
 * The same-host lane and the {@code shm} provider, {@code RdmaDevice.open("shm")}. Per connection,
 * a sealed {@code memfd} ({@link io.regmem.registration.shm.SharedFile}) passed over a Unix domain
 * socket ({@link io.regmem.registration.shm.UnixSocket}) holds four single-producer rings
 * ({@link io.regmem.registration.shm.Ring}): each side's requests and each side's answers. The target
 * checks every request against its own key tables in its grace-period section and moves the bytes
 * itself: small ones through the ring, large WRITEs and SENDs with one {@code process_vm_readv} from
 * the initiator's memory, READ answers through its answer ring. Its own registered memory is never
 * mapped into a peer. The peer process is watched through a pidfd ({@link io.regmem.registration.shm.PeerProcess}).
 */
package io.regmem.registration.shm;

package io.regmem.registration;

/**
 * Why a device dropped an unreliable datagram addressed to one of its QPs
 * ({@link DeviceCounters#datagramsDropped(DatagramDrop)}). A dropped datagram is never queued and never
 * an error at the sender or the receiver: UD is unreliable, and a UD QP never enters the error
 * state because of its peers.
 */
public enum DatagramDrop {
    /** No receive was posted at the destination QP (a NIC's {@code rcv_no_wqe}/{@code out_of_buffer}). */
    NO_RECEIVE,
    /** The receive at the head of the queue is smaller than the 40-byte GRH area plus the message. */
    TOO_SMALL,
    /** The datagram's Q_Key is not the destination QP's ({@code qkey_viol_cntr}). */
    QKEY,
    /**
     * The destination QP number does not exist, is not an unreliable-datagram QP, or is not attached
     * to the group the datagram was sent to.
     */
    NO_QP,
    /**
     * A datagram that reached the device from the network without the tag that proves its sender
     * holds the device's secret (a provider that carries datagrams between processes: ucx).
     */
    UNAUTHENTICATED,
    /**
     * A datagram that reached the device from the network and is not a regmem datagram, or is one
     * whose header breaks the format (too short, unknown version or flags, a QP number out of range,
     * a message longer than the destination's path MTU).
     */
    MALFORMED,
    /**
     * Datagrams that a sender sent and that never reached the device (a provider that carries
     * datagrams over a network: ucx): its sequence for this device skipped them, most often because
     * the kernel's socket buffer overflowed while nobody took what arrived; on shm, also the
     * datagrams of a group's ring that the device did not read before the ring's writer overwrote
     * them. Counted when the next datagram of that sender arrives (losses at the very end of a stream
     * are not seen).
     */
    LOST
}

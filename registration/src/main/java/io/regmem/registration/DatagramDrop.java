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
    NO_QP
}

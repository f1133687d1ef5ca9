package io.regmem.registration;

/** Work completion status ({@code enum ib_wc_status}), the ones regmem's providers report. */
public enum WcStatus {
    /** The work request completed. */
    SUCCESS,
    /** A receive buffer was too small for the message. */
    LOC_LEN_ERR,
    /** A local SGE's key did not resolve, did not cover the SGE, or lacked LOCAL_WRITE where written. */
    LOC_PROT_ERR,
    /** The queue pair was in the error state: the request was flushed, not executed. */
    WR_FLUSH_ERR,
    /** The peer rejected the request as invalid (e.g. its receive buffer was too small). */
    REM_INV_REQ_ERR,
    /** The rkey did not resolve, the range was outside its region, or the rights were missing. The target is untouched. */
    REM_ACCESS_ERR,
    /** The peer could not complete the operation (e.g. a protection error on its receive buffer). */
    REM_OP_ERR,
    /** The peer had no receive posted (receiver not ready) and retries ran out. */
    RNR_RETRY_EXC_ERR,
    /** The peer is gone: retries ran out. */
    RETRY_EXC_ERR,
    /** A failure injected by a test, or one that fits no other status. */
    GENERAL_ERR,
    /**
     * A BIND_MW could not bind its window ({@code IBV_WC_MW_BIND_ERR}): the window is bound already,
     * or gone; the key is not the window's; the region is gone, of another PD, without MW_BIND, too
     * small for the range, or without LOCAL_WRITE for remote write or atomic rights.
     */
    MW_BIND_ERR
}

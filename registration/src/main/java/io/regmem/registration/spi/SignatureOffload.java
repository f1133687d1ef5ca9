package io.regmem.registration.spi;

/**
 * A provider's T10-PI signature offload for software data paths: resolves the one SGE of a request
 * through an integrity MR into wire-image pieces ({@code inbound}: pieces to receive into, checked
 * and scattered after the copy).
 */
public interface SignatureOffload {

    /**
     * @return false on a protection failure (the SGE must be exactly the MR's iova and wire length,
     *         every page reachable), before any byte moves
     */
    boolean gather(IntegrityView mr, long addr, long len, boolean inbound, Segments out);
}

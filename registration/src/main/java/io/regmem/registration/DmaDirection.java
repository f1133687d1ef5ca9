package io.regmem.registration;

/**
 * The direction of a DMA transfer ({@code enum dma_data_direction}): which way the device moves
 * the bytes of a mapped buffer. For RDMA read/write contexts, {@link #TO_DEVICE} means RDMA WRITE
 * (local memory goes out) and {@link #FROM_DEVICE} means RDMA READ (remote memory comes in).
 */
public enum DmaDirection {
    /** Both ways. */
    BIDIRECTIONAL,
    /** Memory to device: data is sent (RDMA WRITE, SEND). */
    TO_DEVICE,
    /** Device to memory: data is received (RDMA READ, receives). */
    FROM_DEVICE,
    /** No transfer: the buffer is never mapped. */
    NONE
}

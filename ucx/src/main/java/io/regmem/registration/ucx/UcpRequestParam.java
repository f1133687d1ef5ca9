package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * {@code ucp_request_param_t}, in jextract's style: the binding's one view of the struct's offsets
 * ({@link UcpLayout}), so the layers above never name one. regmem's parameter blocks are made once
 * (per QP or per receiver) and reused by every request, so nothing here is on the hot path.
 */
final class UcpRequestParam {
    private UcpRequestParam() {
    }

    /** A zeroed parameter block (no fields set: UCX's defaults). */
    static MemorySegment allocate(Arena arena) {
        return arena.allocate(UcpLayout.REQUEST_PARAM_SIZE, 8);
    }

    /** The parameters of an active-message send of contiguous bytes: {@code flags} only. */
    static MemorySegment amSend(Arena arena, int sendFlags) {
        MemorySegment p = allocate(arena);
        p.set(JAVA_INT, UcpLayout.REQUEST_PARAM_OP_ATTR_MASK, UcpLayout.OP_ATTR_FIELD_FLAGS);
        p.set(JAVA_INT, UcpLayout.REQUEST_PARAM_FLAGS, sendFlags);
        return p;
    }

    /** The parameters of an active-message send of an iov list ({@link UcpDtIov}). */
    static MemorySegment amSendIov(Arena arena, int sendFlags) {
        MemorySegment p = allocate(arena);
        p.set(JAVA_INT, UcpLayout.REQUEST_PARAM_OP_ATTR_MASK, UcpLayout.OP_ATTR_FIELD_FLAGS | UcpLayout.OP_ATTR_FIELD_DATATYPE);
        p.set(JAVA_INT, UcpLayout.REQUEST_PARAM_FLAGS, sendFlags);
        p.set(JAVA_LONG, UcpLayout.REQUEST_PARAM_DATATYPE, UcpLayout.DATATYPE_IOV);
        return p;
    }
}

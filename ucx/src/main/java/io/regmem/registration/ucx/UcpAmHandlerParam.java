package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * {@code ucp_am_handler_param_t} and the one field regmem reads of {@code ucp_am_recv_param_t}, in
 * jextract's style: the binding's view of their offsets.
 */
final class UcpAmHandlerParam {
    private UcpAmHandlerParam() {
    }

    /** A handler for AM {@code id}: {@code callback} with {@code arg}, whole messages, persistent data. */
    static MemorySegment of(Arena arena, int id, MemorySegment callback, long arg) {
        MemorySegment p = arena.allocate(UcpLayout.AM_HANDLER_PARAM_SIZE, 8);
        p.set(JAVA_LONG, UcpLayout.AM_HANDLER_FIELD_MASK, UcpLayout.AM_HANDLER_PARAM_FIELD_ID
                | UcpLayout.AM_HANDLER_PARAM_FIELD_FLAGS | UcpLayout.AM_HANDLER_PARAM_FIELD_CB | UcpLayout.AM_HANDLER_PARAM_FIELD_ARG);
        p.set(JAVA_INT, UcpLayout.AM_HANDLER_ID, id);
        p.set(JAVA_INT, UcpLayout.AM_HANDLER_FLAGS, UcpLayout.AM_FLAG_WHOLE_MSG | UcpLayout.AM_FLAG_PERSISTENT_DATA);
        p.set(ADDRESS, UcpLayout.AM_HANDLER_CB, callback);
        p.set(ADDRESS, UcpLayout.AM_HANDLER_ARG, MemorySegment.ofAddress(arg));
        return p;
    }

    /** {@code ucp_am_recv_param_t.recv_attr} of the receive parameters at native address {@code param}. */
    static long recvAttr(long param) {
        return Ucp.NATIVE.get(JAVA_LONG_UNALIGNED, param + UcpLayout.AM_RECV_PARAM_RECV_ATTR);
    }
}

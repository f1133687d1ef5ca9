package io.regmem.registration.ucx;

import static io.regmem.registration.ucx.Ucp.PTR;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

/**
 * The downcall handles of the {@code libucp} and {@code libucs} functions regmem calls, bound once
 * when the library loads; {@link Ucp} wraps each in a method (libc's calls are core's binding's). The data path's calls are bound {@linkplain #bindCritical critical}.
 */
final class UcpFunctions {
    final MethodHandle configRead;
    final MethodHandle configModify;
    final MethodHandle configRelease;
    final MethodHandle initVersion;
    final MethodHandle cleanup;
    final MethodHandle workerCreate;
    final MethodHandle workerDestroy;
    final MethodHandle workerProgress;
    final MethodHandle workerGetAddress;
    final MethodHandle workerReleaseAddress;
    final MethodHandle memMap;
    final MethodHandle memUnmap;
    final MethodHandle memQuery;
    final MethodHandle rkeyPack;
    final MethodHandle rkeyBufferRelease;
    final MethodHandle epCreate;
    final MethodHandle epCloseNbx;
    final MethodHandle epRkeyUnpack;
    final MethodHandle rkeyDestroy;
    final MethodHandle putNbx;
    final MethodHandle getNbx;
    final MethodHandle epFlushNbx;
    final MethodHandle requestCheckStatus;
    final MethodHandle requestFree;
    final MethodHandle requestCancel;
    final MethodHandle statusString;
    final MethodHandle setAmHandler;
    final MethodHandle amSendNbx;
    final MethodHandle amSendNbxCritical;
    final MethodHandle amDataRelease;
    final MethodHandle amRecvDataNbx;
    final MethodHandle epQuery;
    final MethodHandle epPrintInfo;

    UcpFunctions(Linker linker, SymbolLookup ucp, SymbolLookup ucs) {
        configRead = bind(linker, ucp, "ucp_config_read", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        configRelease = bind(linker, ucp, "ucp_config_release", FunctionDescriptor.ofVoid(ADDRESS));
        configModify = bind(linker, ucp, "ucp_config_modify", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        initVersion = bind(linker, ucp, "ucp_init_version",
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        cleanup = bind(linker, ucp, "ucp_cleanup", FunctionDescriptor.ofVoid(ADDRESS));
        workerCreate = bind(linker, ucp, "ucp_worker_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        workerDestroy = bind(linker, ucp, "ucp_worker_destroy", FunctionDescriptor.ofVoid(ADDRESS));
        workerProgress = bind(linker, ucp, "ucp_worker_progress", FunctionDescriptor.of(JAVA_INT, PTR));
        workerGetAddress = bind(linker, ucp, "ucp_worker_get_address", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        workerReleaseAddress = bind(linker, ucp, "ucp_worker_release_address", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS));
        memMap = bind(linker, ucp, "ucp_mem_map", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        memUnmap = bind(linker, ucp, "ucp_mem_unmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        memQuery = bind(linker, ucp, "ucp_mem_query", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        rkeyPack = bind(linker, ucp, "ucp_rkey_pack", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS));
        rkeyBufferRelease = bind(linker, ucp, "ucp_rkey_buffer_release", FunctionDescriptor.ofVoid(ADDRESS));
        epCreate = bind(linker, ucp, "ucp_ep_create", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        epCloseNbx = bind(linker, ucp, "ucp_ep_close_nbx", FunctionDescriptor.of(PTR, PTR, PTR));
        epRkeyUnpack = bind(linker, ucp, "ucp_ep_rkey_unpack", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        rkeyDestroy = bind(linker, ucp, "ucp_rkey_destroy", FunctionDescriptor.ofVoid(ADDRESS));
        putNbx = bindCritical(linker, ucp, "ucp_put_nbx", FunctionDescriptor.of(PTR, PTR, PTR, JAVA_LONG, JAVA_LONG, PTR, PTR));
        getNbx = bindCritical(linker, ucp, "ucp_get_nbx", FunctionDescriptor.of(PTR, PTR, PTR, JAVA_LONG, JAVA_LONG, PTR, PTR));
        epFlushNbx = bindCritical(linker, ucp, "ucp_ep_flush_nbx", FunctionDescriptor.of(PTR, PTR, PTR));
        requestCheckStatus = bindCritical(linker, ucp, "ucp_request_check_status", FunctionDescriptor.of(JAVA_INT, PTR));
        requestFree = bindCritical(linker, ucp, "ucp_request_free", FunctionDescriptor.ofVoid(PTR));
        requestCancel = bind(linker, ucp, "ucp_request_cancel", FunctionDescriptor.ofVoid(PTR, PTR));
        epQuery = bind(linker, ucp, "ucp_ep_query", FunctionDescriptor.of(JAVA_INT, PTR, PTR));
        epPrintInfo = bind(linker, ucp, "ucp_ep_print_info", FunctionDescriptor.ofVoid(PTR, PTR));
        statusString = bind(linker, ucs, "ucs_status_string", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        setAmHandler = bind(linker, ucp, "ucp_worker_set_am_recv_handler", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        amSendNbx = bind(linker, ucp, "ucp_am_send_nbx",
                FunctionDescriptor.of(PTR, PTR, JAVA_INT, PTR, JAVA_LONG, PTR, JAVA_LONG, PTR));
        amSendNbxCritical = bindCritical(linker, ucp, "ucp_am_send_nbx",
                FunctionDescriptor.of(PTR, PTR, JAVA_INT, PTR, JAVA_LONG, PTR, JAVA_LONG, PTR));
        amDataRelease = bindCritical(linker, ucp, "ucp_am_data_release", FunctionDescriptor.ofVoid(PTR, PTR));
        amRecvDataNbx = bindCritical(linker, ucp, "ucp_am_recv_data_nbx",
                FunctionDescriptor.of(PTR, PTR, PTR, PTR, JAVA_LONG, PTR));
    }

    /**
     * A downcall without the thread-state transition ({@code Linker.Option.critical}): for the data
     * path's calls that return at once and never call back into Java (sends, puts, gets, flush
     * starts, request checks and releases; not the worker's progress, which runs the AM callback).
     * The transition's fences cost more than UCX's own work for a small request.
     */
    static MethodHandle bindCritical(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucp has no " + name + ": install UCX 1.13 or later"));
        return linker.downcallHandle(symbol, fd, Linker.Option.critical(false));
    }

    static MethodHandle bind(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucp has no " + name + ": install UCX 1.13 or later"));
        return linker.downcallHandle(symbol, fd);
    }
}

package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/**
 * The {@code libucp} functions regmem calls, bound through the FFM linker (the constants and struct
 * offsets they need are {@link UcpLayout}'s).
 *
 * <p>Loading sets {@code UCX_ERROR_SIGNALS} to empty first (through libc's {@code setenv}): UCX would
 * otherwise install its own handlers for SIGSEGV and friends, which the JVM uses itself. It also sets
 * {@code UCX_RCACHE_ENABLE=n}: UCP's registration cache keeps what is put back into it for the
 * context's life, so every worker destroyed left its send buffers' memory behind (about 2 MiB per
 * connection a listener served with messages of 8 KiB or more), and a cached registration would
 * outlive {@code ucp_mem_unmap}, where regmem's deregistration must end a key. Structs are
 * passed zeroed with only the {@code field_mask} bits regmem fills, so a later UCX whose structs grew
 * reads its defaults for the rest.
 *
 * <p>Every method is a thin downcall; none of them checks its arguments (the callers in this package
 * pass only handles they own). A {@code ucs_status_ptr_t} is decoded with {@link #isError(long)}.
 *
 * <p>The calls of the data path (send, progress, request status and release) take and return their
 * pointers as {@code long} ({@link #PTR}): a pointer-typed argument or result would be wrapped in a new
 * {@code MemorySegment} on every call, and the data path allocates nothing in steady state.
 */
final class Ucp {
    /** A pointer passed as its 64-bit value (the same register and stack slot as a C pointer on LP64). */
    static final ValueLayout.OfLong PTR = JAVA_LONG;
    /**
     * All of the address space: memory UCX hands over by address (an active message's header and
     * data) is read through it at that address as offset, where a segment per message would allocate.
     */
    static final MemorySegment NATIVE = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    /**
     * Every endpoint's error callback: UCX's own no-op ({@code ucs_empty_function}, which UCX uses as
     * a callback of any signature itself). An endpoint without one makes UCX 1.13 abort the process
     * when a transport fails under it: a shared-memory pull ({@code process_vm_readv}) from a peer
     * that died or unmapped what it offered ends in {@code ucs_fatal}. With it, UCX fails the
     * endpoint and its requests instead, which regmem turns into completions with errors. It is
     * native code, not an upcall: UCX may call it inside a critical downcall.
     */
    final MemorySegment ignoreErrors;

    /** The oldest UCX regmem runs on: the API these layouts and calls were written against. */
    static final int MIN_MAJOR = 1;
    static final int MIN_MINOR = 13;

    private final MethodHandle configRead;
    private final MethodHandle configRelease;
    private final MethodHandle initVersion;
    private final MethodHandle cleanup;
    private final MethodHandle workerCreate;
    private final MethodHandle workerDestroy;
    private final MethodHandle workerProgress;
    private final MethodHandle workerGetAddress;
    private final MethodHandle workerReleaseAddress;
    private final MethodHandle memMap;
    private final MethodHandle memUnmap;
    private final MethodHandle memQuery;
    private final MethodHandle rkeyPack;
    private final MethodHandle rkeyBufferRelease;
    private final MethodHandle epCreate;
    private final MethodHandle epCloseNbx;
    private final MethodHandle epRkeyUnpack;
    private final MethodHandle rkeyDestroy;
    private final MethodHandle putNbx;
    private final MethodHandle getNbx;
    private final MethodHandle epFlushNbx;
    private final MethodHandle requestCheckStatus;
    private final MethodHandle requestFree;
    private final MethodHandle requestCancel;
    private final MethodHandle statusString;
    private final MethodHandle setAmHandler;
    private final MethodHandle amSendNbx;
    private final MethodHandle amSendNbxCritical;
    private final MethodHandle amDataRelease;
    private final MethodHandle amRecvDataNbx;
    private final MethodHandle epQuery;
    private final MethodHandle epPrintInfo;
    private final MethodHandle openMemstream;
    private final MethodHandle fclose;
    private final MethodHandle free;
    /** The version of the library that was loaded: major, minor, release. */
    final int major;
    final int minor;
    final int release;

    private static volatile Ucp loaded;
    /** Why loading failed (the message without its errno prefix), or null. */
    private static volatile String failure;

    /**
     * The library, loaded once per JVM.
     *
     * @throws RdmaException {@link Errno#ENODEV} if {@code libucp.so.0} is missing or older than 1.13
     */
    static Ucp get() {
        Ucp u = loaded;
        if (u != null) {
            return u;
        }
        synchronized (Ucp.class) {
            if (loaded == null && failure == null) {
                try {
                    loaded = new Ucp();
                } catch (RdmaException e) {
                    failure = e.getMessage().substring(e.errno().name().length() + 2);
                }
            }
            if (failure != null) {
                throw new RdmaException(Errno.ENODEV, failure);
            }
            return loaded;
        }
    }

    /** The system property naming the directory of a UCX installed outside the library path. */
    static final String LIBDIR = "regmem.ucx.libdir";

    /** {@code name} in {@code -Dregmem.ucx.libdir}, or on the library path when it is not set. */
    private static String library(String name) {
        String dir = System.getProperty(LIBDIR);
        return dir == null || dir.isEmpty() ? name : Path.of(dir, name).toString();
    }

    private Ucp() {
        Linker linker = Linker.nativeLinker();
        setenv(linker, "UCX_ERROR_SIGNALS", "");
        setenv(linker, "UCX_RCACHE_ENABLE", "n");
        SymbolLookup ucp;
        SymbolLookup ucs;
        try {
            ucp = SymbolLookup.libraryLookup(library("libucp.so.0"), Arena.global());
            ucs = SymbolLookup.libraryLookup(library("libucs.so.0"), Arena.global());
        } catch (IllegalArgumentException e) {
            throw new RdmaException(Errno.ENODEV, "ucx: libucp.so.0 not found (" + e.getMessage() + "): install UCX "
                    + "1.13 or later (Debian/Ubuntu: apt-get install libucx0), or name its directory with -D"
                    + LIBDIR + "=...");
        }
        MethodHandle version = bind(linker, ucp, "ucp_get_version", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, ADDRESS));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment v = a.allocate(JAVA_INT, 3);
            version.invokeExact(v, v.asSlice(4), v.asSlice(8));
            major = v.getAtIndex(JAVA_INT, 0);
            minor = v.getAtIndex(JAVA_INT, 1);
            release = v.getAtIndex(JAVA_INT, 2);
        } catch (Throwable t) {
            throw new RdmaException(Errno.ENODEV, "ucx: ucp_get_version failed: " + t);
        }
        if (major < MIN_MAJOR || (major == MIN_MAJOR && minor < MIN_MINOR)) {
            throw new RdmaException(Errno.ENODEV, "ucx: UCX " + major + "." + minor + "." + release + " is too old: regmem needs "
                    + MIN_MAJOR + "." + MIN_MINOR + " or later");
        }
        configRead = bind(linker, ucp, "ucp_config_read", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
        configRelease = bind(linker, ucp, "ucp_config_release", FunctionDescriptor.ofVoid(ADDRESS));
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
        ignoreErrors = ucs.find("ucs_empty_function").orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucs has no ucs_empty_function: install UCX 1.13 or later"));
        SymbolLookup libc = linker.defaultLookup();
        openMemstream = linker.downcallHandle(libc.find("open_memstream").orElseThrow(), FunctionDescriptor.of(PTR, PTR, PTR));
        fclose = linker.downcallHandle(libc.find("fclose").orElseThrow(), FunctionDescriptor.of(JAVA_INT, PTR));
        free = linker.downcallHandle(libc.find("free").orElseThrow(), FunctionDescriptor.ofVoid(PTR));
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
     * The data path's downcalls as constants: static finals, which the JIT folds, so that a call
     * compiles to the native call itself (an instance field's handle is called through a generic
     * invoker). Initialized at the first data-path call, which needs a loaded library ({@link #get}).
     */
    private static final class Hot {
        static final MethodHandle WORKER_PROGRESS = loaded.workerProgress;
        static final MethodHandle PUT_NBX = loaded.putNbx;
        static final MethodHandle GET_NBX = loaded.getNbx;
        static final MethodHandle EP_FLUSH_NBX = loaded.epFlushNbx;
        static final MethodHandle REQUEST_CHECK_STATUS = loaded.requestCheckStatus;
        static final MethodHandle REQUEST_FREE = loaded.requestFree;
        static final MethodHandle AM_SEND_NBX = loaded.amSendNbx;
        static final MethodHandle AM_SEND_NBX_CRITICAL = loaded.amSendNbxCritical;

        private Hot() {
        }
    }

    /**
     * A downcall without the thread-state transition ({@code Linker.Option.critical}): for the data
     * path's calls that return at once and never call back into Java (sends, puts, gets, flush
     * starts, request checks and releases; not the worker's progress, which runs the AM callback).
     * The transition's fences cost more than UCX's own work for a small request.
     */
    private static MethodHandle bindCritical(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucp has no " + name + ": install UCX 1.13 or later"));
        return linker.downcallHandle(symbol, fd, Linker.Option.critical(false));
    }

    private static MethodHandle bind(Linker linker, SymbolLookup lib, String name, FunctionDescriptor fd) {
        MemorySegment symbol = lib.find(name).orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucp has no " + name + ": install UCX 1.13 or later"));
        return linker.downcallHandle(symbol, fd);
    }

    private static void setenv(Linker linker, String name, String value) {
        MethodHandle setenv = linker.downcallHandle(linker.defaultLookup().find("setenv").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        try (Arena a = Arena.ofConfined()) {
            int rc = (int) setenv.invokeExact(a.allocateFrom(name), a.allocateFrom(value), 1);
            if (rc != 0) {
                throw new RdmaException(Errno.ENODEV, "ucx: setenv(" + name + ") failed");
            }
        } catch (RdmaException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /** True if a {@code ucs_status_ptr_t} is an error (its unsigned value is at least {@code UCS_ERR_LAST}). */
    static boolean isError(long statusPtr) {
        return Long.compareUnsigned(statusPtr, UcpLayout.UCS_ERR_LAST) >= 0;
    }

    /** The status of an error pointer ({@link #isError}). */
    static int status(long statusPtr) {
        return (int) statusPtr;
    }

    /** UCX's description of a status, with its number. */
    String describe(int status) {
        try {
            MemorySegment s = (MemorySegment) statusString.invokeExact(status);
            return s.reinterpret(256).getString(0) + " (" + status + ")";
        } catch (Throwable t) {
            return "status " + status;
        }
    }

    /** Throws {@code errno} with UCX's description if {@code status} is not {@code UCS_OK}. */
    void check(int status, Errno errno, String what) {
        if (status != UcpLayout.UCS_OK) {
            throw new RdmaException(errno, what + ": " + describe(status));
        }
    }

    int configRead(MemorySegment configOut) {
        try {
            return (int) configRead.invokeExact(MemorySegment.NULL, MemorySegment.NULL, configOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void configRelease(MemorySegment config) {
        try {
            configRelease.invokeExact(config);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int init(MemorySegment params, MemorySegment config, MemorySegment contextOut) {
        try {
            return (int) initVersion.invokeExact(MIN_MAJOR, MIN_MINOR, params, config, contextOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void cleanup(MemorySegment context) {
        try {
            cleanup.invokeExact(context);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int workerCreate(MemorySegment context, MemorySegment params, MemorySegment workerOut) {
        try {
            return (int) workerCreate.invokeExact(context, params, workerOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void workerDestroy(MemorySegment worker) {
        try {
            workerDestroy.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Progresses the worker: returns nonzero if it did something. */
    int workerProgress(long worker) {
        try {
            return (int) Hot.WORKER_PROGRESS.invokeExact(worker);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int workerGetAddress(MemorySegment worker, MemorySegment addressOut, MemorySegment lengthOut) {
        try {
            return (int) workerGetAddress.invokeExact(worker, addressOut, lengthOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void workerReleaseAddress(MemorySegment worker, MemorySegment address) {
        try {
            workerReleaseAddress.invokeExact(worker, address);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memMap(MemorySegment context, MemorySegment params, MemorySegment memhOut) {
        try {
            return (int) memMap.invokeExact(context, params, memhOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memUnmap(MemorySegment context, MemorySegment memh) {
        try {
            return (int) memUnmap.invokeExact(context, memh);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memQuery(MemorySegment memh, MemorySegment attr) {
        try {
            return (int) memQuery.invokeExact(memh, attr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int rkeyPack(MemorySegment context, MemorySegment memh, MemorySegment bufferOut, MemorySegment sizeOut) {
        try {
            return (int) rkeyPack.invokeExact(context, memh, bufferOut, sizeOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void rkeyBufferRelease(MemorySegment buffer) {
        try {
            rkeyBufferRelease.invokeExact(buffer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int epCreate(MemorySegment worker, MemorySegment params, MemorySegment epOut) {
        try {
            return (int) epCreate.invokeExact(worker, params, epOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    long epClose(long ep, long param) {
        try {
            return (long) epCloseNbx.invokeExact(ep, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int epRkeyUnpack(MemorySegment ep, MemorySegment packed, MemorySegment rkeyOut) {
        try {
            return (int) epRkeyUnpack.invokeExact(ep, packed, rkeyOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void rkeyDestroy(MemorySegment rkey) {
        try {
            rkeyDestroy.invokeExact(rkey);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    long put(long ep, long buffer, long length, long remoteAddress, long rkey, long param) {
        try {
            return (long) Hot.PUT_NBX.invokeExact(ep, buffer, length, remoteAddress, rkey, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    long get(long ep, long buffer, long length, long remoteAddress, long rkey, long param) {
        try {
            return (long) Hot.GET_NBX.invokeExact(ep, buffer, length, remoteAddress, rkey, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    long flush(long ep, long param) {
        try {
            return (long) Hot.EP_FLUSH_NBX.invokeExact(ep, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int requestStatus(long request) {
        try {
            return (int) Hot.REQUEST_CHECK_STATUS.invokeExact(request);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void requestFree(long request) {
        try {
            Hot.REQUEST_FREE.invokeExact(request);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * What {@code ucp_ep_print_info} says of endpoint {@code ep} (its configuration: lanes,
     * transports, protocol thresholds), or null if it could not be captured. Worker lock held.
     */
    String epInfo(long ep) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment ptr = a.allocate(JAVA_LONG);
            MemorySegment size = a.allocate(JAVA_LONG);
            long f = (long) openMemstream.invokeExact(ptr.address(), size.address());
            if (f == 0) {
                return null;
            }
            epPrintInfo.invokeExact(ep, f);
            int closed = (int) fclose.invokeExact(f);
            long buf = ptr.get(JAVA_LONG, 0);
            long n = size.get(JAVA_LONG, 0);
            try {
                return closed != 0 || buf == 0 || n < 0 || n > (1 << 20) ? null
                        : new String(MemorySegment.ofAddress(buf).reinterpret(n).toArray(ValueLayout.JAVA_BYTE),
                                StandardCharsets.UTF_8);
            } finally {
                free.invokeExact(buf);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ucp_ep_query(ep, attr)}: a ucs_status_t. */
    int epQuery(long ep, long attr) {
        try {
            return (int) epQuery.invokeExact(ep, attr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void requestCancel(long worker, long request) {
        try {
            requestCancel.invokeExact(worker, request);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int setAmHandler(MemorySegment worker, MemorySegment param) {
        try {
            return (int) setAmHandler.invokeExact(worker, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code ucp_am_send_nbx}. {@code toSelf}: the endpoint leads to this very worker, whose loopback
     * transport runs the receiver's AM callback inside the send (an upcall), so the call must make
     * the thread-state transition; to any other worker the send never calls back and goes as a
     * critical downcall.
     */
    long amSend(long ep, int id, long header, long headerLength, long buffer, long count, long param, boolean toSelf) {
        try {
            return toSelf ? (long) Hot.AM_SEND_NBX.invokeExact(ep, id, header, headerLength, buffer, count, param)
                    : (long) Hot.AM_SEND_NBX_CRITICAL.invokeExact(ep, id, header, headerLength, buffer, count, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code ucp_am_recv_data_nbx}: receives a rendezvous message's data (the descriptor its AM
     * callback got) into {@code buffer} ({@code count} bytes, or {@code count} iov entries with an iov
     * datatype in {@code param}); 0 when done at once, an error pointer, or the request to poll.
     */
    long amRecvData(long worker, long desc, long buffer, long count, long param) {
        try {
            return (long) amRecvDataNbx.invokeExact(worker, desc, buffer, count, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void amDataRelease(long worker, long data) {
        try {
            amDataRelease.invokeExact(worker, data);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException(t);
    }
}

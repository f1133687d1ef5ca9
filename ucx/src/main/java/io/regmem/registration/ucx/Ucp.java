package io.regmem.registration.ucx;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.internal.Stdlib;
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

    /** The bound functions of libucp and libucs (and libc's, for {@link #epInfo}). */
    final UcpFunctions fn;
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
        setenv("UCX_ERROR_SIGNALS", "");
        setenv("UCX_RCACHE_ENABLE", "n");
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
        MethodHandle version = UcpFunctions.bind(linker, ucp, "ucp_get_version", FunctionDescriptor.ofVoid(ADDRESS, ADDRESS, ADDRESS));
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
        ignoreErrors = ucs.find("ucs_empty_function").orElseThrow(
                () -> new RdmaException(Errno.ENODEV, "ucx: libucs has no ucs_empty_function: install UCX 1.13 or later"));
        fn = new UcpFunctions(linker, ucp, ucs);
    }

    /**
     * The data path's downcalls as constants: static finals, which the JIT folds, so that a call
     * compiles to the native call itself (an instance field's handle is called through a generic
     * invoker). Initialized at the first data-path call, which needs a loaded library ({@link #get}).
     */
    private static final class Hot {
        static final MethodHandle WORKER_PROGRESS = loaded.fn.workerProgress;
        static final MethodHandle PUT_NBX = loaded.fn.putNbx;
        static final MethodHandle GET_NBX = loaded.fn.getNbx;
        static final MethodHandle EP_FLUSH_NBX = loaded.fn.epFlushNbx;
        static final MethodHandle REQUEST_CHECK_STATUS = loaded.fn.requestCheckStatus;
        static final MethodHandle REQUEST_FREE = loaded.fn.requestFree;
        static final MethodHandle AM_SEND_NBX = loaded.fn.amSendNbx;
        static final MethodHandle AM_SEND_NBX_CRITICAL = loaded.fn.amSendNbxCritical;

        private Hot() {
        }
    }

    private static void setenv(String name, String value) {
        if (!Stdlib.setenv(name, value)) {
            throw new RdmaException(Errno.ENODEV, "ucx: setenv(" + name + ") failed");
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
            MemorySegment s = (MemorySegment) fn.statusString.invokeExact(status);
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
            return (int) fn.configRead.invokeExact(MemorySegment.NULL, MemorySegment.NULL, configOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int configModify(MemorySegment config, MemorySegment name, MemorySegment value) {
        try {
            return (int) fn.configModify.invokeExact(config, name, value);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void configRelease(MemorySegment config) {
        try {
            fn.configRelease.invokeExact(config);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int init(MemorySegment params, MemorySegment config, MemorySegment contextOut) {
        try {
            return (int) fn.initVersion.invokeExact(MIN_MAJOR, MIN_MINOR, params, config, contextOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void cleanup(MemorySegment context) {
        try {
            fn.cleanup.invokeExact(context);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int workerCreate(MemorySegment context, MemorySegment params, MemorySegment workerOut) {
        try {
            return (int) fn.workerCreate.invokeExact(context, params, workerOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void workerDestroy(MemorySegment worker) {
        try {
            fn.workerDestroy.invokeExact(worker);
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
            return (int) fn.workerGetAddress.invokeExact(worker, addressOut, lengthOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void workerReleaseAddress(MemorySegment worker, MemorySegment address) {
        try {
            fn.workerReleaseAddress.invokeExact(worker, address);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memMap(MemorySegment context, MemorySegment params, MemorySegment memhOut) {
        try {
            return (int) fn.memMap.invokeExact(context, params, memhOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memUnmap(MemorySegment context, MemorySegment memh) {
        try {
            return (int) fn.memUnmap.invokeExact(context, memh);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int memQuery(MemorySegment memh, MemorySegment attr) {
        try {
            return (int) fn.memQuery.invokeExact(memh, attr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int rkeyPack(MemorySegment context, MemorySegment memh, MemorySegment bufferOut, MemorySegment sizeOut) {
        try {
            return (int) fn.rkeyPack.invokeExact(context, memh, bufferOut, sizeOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void rkeyBufferRelease(MemorySegment buffer) {
        try {
            fn.rkeyBufferRelease.invokeExact(buffer);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int epCreate(MemorySegment worker, MemorySegment params, MemorySegment epOut) {
        try {
            return (int) fn.epCreate.invokeExact(worker, params, epOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    long epClose(long ep, long param) {
        try {
            return (long) fn.epCloseNbx.invokeExact(ep, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int epRkeyUnpack(MemorySegment ep, MemorySegment packed, MemorySegment rkeyOut) {
        try {
            return (int) fn.epRkeyUnpack.invokeExact(ep, packed, rkeyOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void rkeyDestroy(MemorySegment rkey) {
        try {
            fn.rkeyDestroy.invokeExact(rkey);
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
            long f = Stdlib.openMemstream(ptr.address(), size.address());
            if (f == 0) {
                return null;
            }
            fn.epPrintInfo.invokeExact(ep, f);
            int closed = Stdlib.fclose(f);
            long buf = ptr.get(JAVA_LONG, 0);
            long n = size.get(JAVA_LONG, 0);
            try {
                return closed != 0 || buf == 0 || n < 0 || n > (1 << 20) ? null
                        : new String(MemorySegment.ofAddress(buf).reinterpret(n).toArray(ValueLayout.JAVA_BYTE),
                                StandardCharsets.UTF_8);
            } finally {
                Stdlib.free(buf);
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ucp_ep_query(ep, attr)}: a ucs_status_t. */
    int epQuery(long ep, long attr) {
        try {
            return (int) fn.epQuery.invokeExact(ep, attr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void requestCancel(long worker, long request) {
        try {
            fn.requestCancel.invokeExact(worker, request);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    int setAmHandler(MemorySegment worker, MemorySegment param) {
        try {
            return (int) fn.setAmHandler.invokeExact(worker, param);
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
            return (long) fn.amRecvDataNbx.invokeExact(worker, desc, buffer, count, param);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    void amDataRelease(long worker, long data) {
        try {
            fn.amDataRelease.invokeExact(worker, data);
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

package io.regmem.registration.uring;

import io.regmem.core.RdmaException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Run by {@code UringUnavailableTest} in a child JVM: installs a seccomp filter on this thread that
 * makes {@code io_uring_setup} fail with ENOSYS (as Docker's default profile does), then builds a
 * ring. Prints {@code OK <errno> <message>}, or what went wrong.
 */
public final class UringSeccompMain {
    private UringSeccompMain() {
    }

    public static void main(String[] args) throws Throwable {
        int errno = Integer.parseInt(args[0]);
        Linker linker = Linker.nativeLinker();
        MethodHandle prctl = linker.downcallHandle(linker.defaultLookup().find("prctl").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), Linker.Option.firstVariadicArg(1));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment filter = arena.allocate(32, 8); // struct sock_filter[4]
            put(filter, 0, 0x20, 0, 0, 0);                    // A = seccomp_data.nr
            put(filter, 1, 0x15, 0, 1, (int) UringLayout.SYS_IO_URING_SETUP); // if A == io_uring_setup
            put(filter, 2, 0x06, 0, 0, 0x0005_0000 | errno);  //   return SECCOMP_RET_ERRNO | errno
            put(filter, 3, 0x06, 0, 0, 0x7fff_0000);          // return SECCOMP_RET_ALLOW
            MemorySegment prog = arena.allocate(16, 8);       // struct sock_fprog
            prog.set(ValueLayout.JAVA_SHORT, 0, (short) 4);
            prog.set(ValueLayout.JAVA_LONG, 8, filter.address());
            int rc1 = (int) prctl.invokeExact(38, 1L, 0L, 0L, 0L);               // PR_SET_NO_NEW_PRIVS
            int rc2 = (int) prctl.invokeExact(22, 2L, prog.address(), 0L, 0L);   // PR_SET_SECCOMP, FILTER
            if (rc1 != 0 || rc2 != 0) {
                System.out.println("SECCOMP prctl failed: " + rc1 + " " + rc2);
                System.exit(2);
            }
        }
        try (IoRing ring = IoRing.open(8)) {
            System.out.println("FAIL: a ring was set up under the filter: " + ring);
            System.exit(1);
        } catch (RdmaException e) {
            System.out.println("OK " + e.errno() + " " + e.getMessage());
        }
    }

    private static void put(MemorySegment f, int i, int code, int jt, int jf, int k) {
        f.set(ValueLayout.JAVA_SHORT, i * 8L, (short) code);
        f.set(ValueLayout.JAVA_BYTE, i * 8L + 2, (byte) jt);
        f.set(ValueLayout.JAVA_BYTE, i * 8L + 3, (byte) jf);
        f.set(ValueLayout.JAVA_INT, i * 8L + 4, k);
    }
}

/**
 * io_uring for regmem's memory: rings, registered (fixed) buffers over a pool's chunks and fixed
 * files, through FFM with no native library of its own. It depends on {@code io.regmem.core} only.
 *
 * <p>Grant native access to this module and to {@code io.regmem.core}:
 * {@code --enable-native-access=io.regmem.core,io.regmem.uring}.
 */
module io.regmem.uring {
    requires transitive io.regmem.core;

    exports io.regmem.registration.uring;
}

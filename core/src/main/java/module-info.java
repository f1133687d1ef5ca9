/**
 * regmem's allocator: {@link io.regmem.core.BufferPool} and its buffers, chunk sources and scatter
 * lists, with no notion of a transport.
 *
 * <p>Memory comes from {@code mmap} through FFM: grant this module native access
 * ({@code --enable-native-access=io.regmem.core}). {@code PooledBuffer.asDirectBuffer()} returns an
 * Agrona buffer (Agrona is a dependency); {@code PooledBuffer.asBytesStore()} needs Chronicle Bytes,
 * which is optional: add {@code net.openhft:chronicle-bytes} and, on the module path,
 * {@code --add-modules chronicle.bytes}.
 */
@SuppressWarnings("module") // io.regmem.uring, io.regmem.shm and io.regmem.ucx need not be present
module io.regmem.core {
    requires transitive org.agrona;
    requires org.jctools.core;
    // JCTools reaches sun.misc.Unsafe but only "requires static" jdk.unsupported, which resolves
    // nothing at run time: without this, an application of core alone fails with NoClassDefFoundError
    // on the module path (regmem's own code does not use it).
    requires jdk.unsupported;
    requires static chronicle.bytes;
    requires jdk.jfr;

    exports io.regmem.core;
    exports io.regmem.core.internal to io.regmem.uring, io.regmem.shm, io.regmem.registration, io.regmem.ucx, io.regmem.netty;
}

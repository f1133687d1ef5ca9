package io.regmem.core;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * Whether Agrona's {@code UnsafeBuffer} can work in this JVM: Agrona 2.x uses
 * {@code jdk.internal.misc.Unsafe}, which {@code java.base} exports only when told to. Without the
 * export, the first access through the buffer fails with an {@link IllegalAccessError} deep inside
 * Agrona; {@link PooledBuffer#asDirectBuffer()} says so up front instead.
 */
final class AgronaAccess {
    /** True if {@code java.base} exports {@code jdk.internal.misc} to Agrona's module. */
    static final boolean USABLE = Object.class.getModule().isExported("jdk.internal.misc",
            UnsafeBuffer.class.getModule());

    /** The flag that makes it usable, for Agrona where it is loaded now. */
    static final String FLAG = "--add-exports java.base/jdk.internal.misc="
            + (UnsafeBuffer.class.getModule().isNamed()
                    ? UnsafeBuffer.class.getModule().getName() : "ALL-UNNAMED");

    private AgronaAccess() {
    }
}

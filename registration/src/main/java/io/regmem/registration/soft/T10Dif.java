package io.regmem.registration.soft;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * CRC-16/T10-DIF, the guard of T10 protection information: polynomial 0x8BB7, initial value 0,
 * no reflection, no final XOR (check value of "123456789": 0xD0DB). Table-driven, one byte at a time.
 */
final class T10Dif {
    private static final int[] TABLE = new int[256];

    static {
        for (int i = 0; i < 256; i++) {
            int crc = i << 8;
            for (int b = 0; b < 8; b++) {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x8BB7 : crc << 1;
            }
            TABLE[i] = crc & 0xFFFF;
        }
    }

    private T10Dif() {
    }

    /** The guard of {@code [offset, offset + length)} of {@code segment}. */
    static int crc16(MemorySegment segment, long offset, long length) {
        int crc = 0;
        for (long i = 0; i < length; i++) {
            int b = segment.get(ValueLayout.JAVA_BYTE, offset + i) & 0xFF;
            crc = ((crc << 8) ^ TABLE[((crc >>> 8) ^ b) & 0xFF]) & 0xFFFF;
        }
        return crc;
    }

    /** The guard of a byte array. */
    static int crc16(byte[] bytes) {
        return crc16(MemorySegment.ofArray(bytes), 0, bytes.length);
    }
}

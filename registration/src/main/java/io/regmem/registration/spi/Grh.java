package io.regmem.registration.spi;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.nio.ByteOrder;

/**
 * The 40-byte GRH area at the start of an unreliable-datagram receive, as RoCEv2 (rxe) fills it:
 * for an IPv4 datagram, 20 zero bytes and then the packet's IPv4 header; for IPv6, the IPv6
 * header. The headers describe the RoCEv2 packet that would have carried the datagram (UDP, BTH,
 * DETH, the immediate if any, the payload and the ICRC). One per executor: it keeps the last header
 * it wrote (a datagram like the last one is not written again) and the last
 * addresses' bytes, so a steady stream to one destination allocates nothing.
 */
public final class Grh {
    /** Bytes of the GRH area at the start of every UD receive buffer. */
    public static final int BYTES = 40;
    /** UDP, BTH, DETH and ICRC around a RoCEv2 datagram's payload. */
    private static final int ROCE_OVERHEAD = 8 + 12 + 8 + 4;
    private static final ValueLayout.OfShort BE_SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private final MemorySegment area = MemorySegment.ofArray(new byte[BYTES]);
    private InetAddress lastSource;
    private InetAddress lastDestination;
    private byte[] source;
    private byte[] destination;
    /** What the area holds now (the GRH of the last fill: a stream of like datagrams writes it once). */
    private boolean filled;
    private long lastPayload;
    private boolean lastImm;
    private int lastHop;
    private int lastClass;

    /** A GRH writer with its own 40-byte area. */
    public Grh() {
    }

    /** The area {@link #fill} wrote: 40 bytes. */
    public MemorySegment area() {
        return area;
    }

    /**
     * Writes the GRH of a datagram from {@code src} to {@code dst} with {@code payload} bytes into
     * {@link #area()}. IPv4 when {@code dst} is IPv4 (the source then IPv4 too), else IPv6; the
     * traffic class is the IPv4 TOS byte or IPv6's traffic class.
     */
    public MemorySegment fill(InetAddress src, InetAddress dst, long payload, boolean withImm, int hopLimit, int trafficClass) {
        if (filled && src == lastSource && dst == lastDestination && payload == lastPayload && withImm == lastImm
                && hopLimit == lastHop && trafficClass == lastClass) {
            return area; // (the same header as the last one)
        }
        filled = false;
        if (src != lastSource) {
            source = src.getAddress();
            lastSource = src;
        }
        if (dst != lastDestination) {
            destination = dst.getAddress();
            lastDestination = dst;
        }
        lastPayload = payload;
        lastImm = withImm;
        lastHop = hopLimit;
        lastClass = trafficClass;
        int carried = (int) Math.min(0xFFFF, ROCE_OVERHEAD + (withImm ? 4 : 0) + payload);
        area.fill((byte) 0);
        if (dst instanceof Inet4Address && source.length == 4) {
            int o = 20;
            area.set(ValueLayout.JAVA_BYTE, o, (byte) 0x45);
            area.set(ValueLayout.JAVA_BYTE, o + 1, (byte) trafficClass);
            area.set(BE_SHORT, o + 2, (short) Math.min(0xFFFF, 20 + carried));
            area.set(BE_SHORT, o + 6, (short) 0x4000); // don't fragment
            area.set(ValueLayout.JAVA_BYTE, o + 8, (byte) hopLimit);
            area.set(ValueLayout.JAVA_BYTE, o + 9, (byte) 17); // UDP
            MemorySegment.copy(source, 0, area, ValueLayout.JAVA_BYTE, o + 12, 4);
            MemorySegment.copy(destination, 0, area, ValueLayout.JAVA_BYTE, o + 16, 4);
            area.set(BE_SHORT, o + 10, checksum(o));
        } else {
            area.set(ValueLayout.JAVA_BYTE, 0, (byte) (0x60 | (trafficClass >>> 4) & 0x0F));
            area.set(ValueLayout.JAVA_BYTE, 1, (byte) ((trafficClass & 0x0F) << 4));
            area.set(BE_SHORT, 4, (short) carried);
            area.set(ValueLayout.JAVA_BYTE, 6, (byte) 17);
            area.set(ValueLayout.JAVA_BYTE, 7, (byte) hopLimit);
            copy16(source, 8);
            copy16(destination, 24);
        }
        filled = true;
        return area;
    }

    private void copy16(byte[] address, int at) {
        if (address.length == 16) {
            MemorySegment.copy(address, 0, area, ValueLayout.JAVA_BYTE, at, 16);
        } else { // an IPv4 address in an IPv6 header: IPv4-mapped
            area.set(ValueLayout.JAVA_BYTE, at + 10, (byte) 0xFF);
            area.set(ValueLayout.JAVA_BYTE, at + 11, (byte) 0xFF);
            MemorySegment.copy(address, 0, area, ValueLayout.JAVA_BYTE, at + 12, 4);
        }
    }

    /** The IPv4 header checksum of the 20 bytes at {@code o} (its checksum field zero). */
    private short checksum(int o) {
        int sum = 0;
        for (int i = 0; i < 20; i += 2) {
            sum += Short.toUnsignedInt(area.get(BE_SHORT, o + i));
        }
        while ((sum >>> 16) != 0) {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        return (short) ~sum;
    }
}

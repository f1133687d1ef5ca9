package io.regmem.registration;

import java.net.InetAddress;

/**
 * A CM ID's source and destination GIDs ({@code rdma_read_gids}, {@link CmId#readGids()}), as IP
 * addresses: RoCE's GIDs are IP addresses ({@link AhAttributes#of(InetAddress)}{@code .gid()} gives
 * one's 16 bytes, IPv4-mapped).
 *
 * @param source      the local GID
 * @param destination the peer's or the resolved destination's GID, or null without one
 */
public record GidPair(InetAddress source, InetAddress destination) {
}

/**
 * Unreliable datagrams over the kernel's UDP/IP, shared by the providers that carry UD QPs and
 * multicast between processes and hosts (ucx): the carrier (a device's sockets, its QPs by number,
 * its groups), the UD QP, the wire format and its SipHash-2-4 tag. Not API.
 */
package io.regmem.registration.udp;

/**
 * The embedded in-process provider, {@code RdmaDevice.open("soft")}: a software NIC whose data path
 * checks keys, ranges and rights as hardware does and moves bytes with {@code MemorySegment.copy},
 * connections between QPs of this JVM by listener name, T10-PI signature offload, and fault injection
 * for tests ({@link io.regmem.registration.faults.QpFaults}, reached with {@code qp.unwrap(QpFaults.class)}).
 */
package io.regmem.registration.soft;

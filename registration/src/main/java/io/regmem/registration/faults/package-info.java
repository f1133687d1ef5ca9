/**
 * Fault injection for tests: {@link io.regmem.registration.faults.QpFaults}, reached with
 * {@code qp.unwrap(QpFaults.class)} on a provider that offers it (soft does).
 */
package io.regmem.registration.faults;

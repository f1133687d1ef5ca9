/**
 * What the registration module's packages share and applications must not use: the rw sizing rules
 * ({@code rw} publishes them as {@code RdmaRw}), the branch-free sorted search of the address
 * indexes, and the bridge through which a registration cache reports to its PD. Not exported: on
 * the module path no application can reach it; on the class path it is not API either and changes
 * without notice. It names only value types of the verbs package, so it adds no import circle.
 */
package io.regmem.registration.internal;

/**
 * What core shares with regmem's other modules and not with applications: the one binding of the
 * libc memory calls and errno capture ({@link io.regmem.core.internal.Libc}). Exported only to
 * {@code io.regmem.uring}; on the class path it is not API and changes without notice.
 */
package io.regmem.core.internal;
